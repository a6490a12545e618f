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
  constructor(message: string, cause?: unknown) {
    super('STAMPEDE_STORE_UNAVAILABLE', message, { cause });
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
