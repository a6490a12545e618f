/** Base class of every error this library throws; `code` is stable and safe to switch on. */
export class StampedeError extends Error {
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Invalid options, found at start-up (module options or decorator arguments). */
export class StampedeConfigError extends StampedeError {
  constructor(message: string) {
    super('STAMPEDE_CONFIG', message);
  }
}

/** The store (Redis) did not answer in time or is known to be down. Callers never see it: the flow falls back to the loader. */
export class StoreUnavailableError extends StampedeError {
  /**
   * True when the command was sent and may still be carried out (it timed out, or the connection
   * dropped under it); false when it never left this process (the store was known down).
   */
  readonly maybeApplied: boolean;

  constructor(message: string, cause?: unknown, maybeApplied = false) {
    super('STAMPEDE_STORE_UNAVAILABLE', message, { cause });
    this.maybeApplied = maybeApplied;
  }
}

/** A method argument that cannot be turned into a cache key (a function, a symbol, a cycle). */
export class StampedeKeyError extends StampedeError {
  constructor(message: string) {
    super('STAMPEDE_KEY', message);
  }
}

/** A load ran past its hard timeout; it may still finish and fill the cache. */
export class StampedeTimeoutError extends StampedeError {
  constructor(message: string) {
    super('STAMPEDE_TIMEOUT', message);
  }
}

/**
 * A loader's value that the serializer cannot write (a BigInt or a cycle under JSON). The value
 * was not cached, and the lock, if any, was released.
 */
export class StampedeSerializationError extends StampedeError {
  constructor(
    /** The method (`Class.method`) or getOrLoad name. */
    readonly method: string,
    key: string,
    cause: unknown,
  ) {
    super(
      'STAMPEDE_SERIALIZATION',
      `${method}: the value loaded for "${key}" cannot be serialized ` +
        `(${cause instanceof Error ? cause.message : String(cause)}); it was not cached. ` +
        'Return plain data, or give StampedeModule a serializer that writes this value.',
      { cause },
    );
  }
}

/**
 * `invalidate()` or `invalidateTags()` was not confirmed by the store. With `pending`, the step
 * (the delete, or a tag's new version) was sent and may still be carried out; the broadcast to
 * the other instances goes with it, in the same step. Without, nothing was done and no instance
 * was told. Either way the old values may be served until their TTL: call it again.
 */
export class StampedeInvalidationError extends StampedeError {
  /** For `invalidateTags()`: the tags not confirmed (the call's other tags were invalidated). */
  readonly tags?: string[];

  constructor(
    /** The key given to `invalidate()`, or the tags of `invalidateTags()` not confirmed. */
    target: string | string[],
    /** The store may still carry out the invalidation (and then tells every instance). */
    readonly pending: boolean,
    cause: unknown,
  ) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super(
      'STAMPEDE_INVALIDATION',
      typeof target === 'string'
        ? pending
          ? `invalidate("${target}") was not confirmed (${reason}). The delete may still happen; ` +
            'if it does, every instance is told in the same step. Until then the old value may ' +
            'be served: call invalidate() again to be sure.'
          : `invalidate("${target}") failed (${reason}): nothing was deleted and no other instance ` +
            'was told; the old value may be served until its TTL. Call invalidate() again once ' +
            'the store answers.'
        : pending
          ? `invalidateTags(): ${quoted(target)} not confirmed (${reason}). The new versions may ` +
            'still be set; each one that is reaches every instance in the same step. Until then ' +
            'values with these tags may be served: call invalidateTags() again with them to be sure.'
          : `invalidateTags(): ${quoted(target)} failed (${reason}): no new version was set for ` +
            'them and no other instance was told; values with these tags may be served until ' +
            'their TTL. Call invalidateTags() again with them once the store answers.',
      { cause },
    );
    if (typeof target !== 'string') this.tags = target;
  }
}

function quoted(tags: string[]): string {
  return `${tags.length === 1 ? 'tag' : 'tags'} ${tags.map((tag) => JSON.stringify(tag)).join(', ')}`;
}
