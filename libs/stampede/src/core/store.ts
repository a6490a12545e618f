import type { Envelope, EnvelopeCodec } from './envelope';

/** Outcome of one atomic "read the value, else try to take the lock" step. */
export type ReadOrLockResult<T = unknown> =
  /**
   * The stored value. With `refreshTtlMs`, a refresh of it is in flight (its lock expires in that
   * many ms) and the caller is registered as its waiter: a caller that finds the value expired
   * waits for that refresh's fill.
   */
  | { kind: 'hit'; envelope: Envelope<T>; refreshTtlMs?: number }
  /** The lock was taken; `token`, when given, replaces the caller's token for fill, unlock and extend. */
  | { kind: 'locked'; token?: string }
  /** Someone else holds the lock; it expires in `lockTtlMs` (-1: unknown). */
  | { kind: 'busy'; lockTtlMs: number };

/** A registration for the next fill or release of one key's lock. */
export interface FillWatch {
  /** Resolves once notifications reach this watch (a distributed store subscribes first); false if they cannot. */
  readonly ready: Promise<boolean>;
  /** Resolves when the key is filled or its lock released, by this or another instance. */
  readonly done: Promise<void>;
  /** Stops listening; always call it. */
  cancel(): void;
}

/**
 * What one instance tells the others: keys to drop from their L1, tags with their new versions
 * (`tags`: invalidated hard; `soft`: invalidated softly, older values turn stale, not invalid).
 */
export interface InvalidationMessage {
  keys?: string[];
  tags?: Record<string, number>;
  soft?: Record<string, number>;
}

/** How a tag was last invalidated: values stamped below `hardFloor` are invalid, up to `version` stale. */
export interface TagState {
  version: number;
  hardFloor: number;
}

/** `hard` drops the values (a miss); `soft` marks them stale (served within grace while one refresh runs). */
export type InvalidationMode = 'hard' | 'soft';

/**
 * Where values live: envelopes by key, and the versions of tags. Every method may reject with
 * StoreUnavailableError; the flow then answers from the values held here or the loader.
 */
export interface ValueStore {
  /** Shown in logs and health details. */
  readonly name: string;
  /** True when locks and notifications reach other processes. */
  readonly distributed: boolean;
  /** The codec of the stored texts, for a store that encodes: `fill` takes a text encoded with it. */
  readonly codec?: EnvelopeCodec;

  get<T>(key: string): Promise<Envelope<T> | undefined>;
  /**
   * The envelopes of `keys`, in their order, in as few round trips as the backend allows (one
   * MGET per Cluster slot with Redis). Without it, getOrLoadMany sends one `get` per key.
   */
  getMany?<T>(keys: string[]): Promise<(Envelope<T> | undefined)[]>;
  set(key: string, envelope: Envelope, ttlMs: number): Promise<void>;
  delete(key: string): Promise<void>;
  /**
   * How long the store still skips its backend after a timeout (the cool-down), in ms; 0 when it
   * does not. Calls made meanwhile are answered without the store.
   */
  cooldownRemainingMs?(): number;
  /**
   * The current versions of `tags`, kept where every instance sees them. A missing version (never
   * set, or lost) is set first, to at least `floors[i]` and the store's clock in microseconds.
   */
  tagVersions?(tags: string[], floors: number[]): Promise<number[]>;
  /**
   * As `tagVersions`, with the version of each tag's last hard invalidation (below the current
   * one after soft invalidations). Without it, every older version counts as invalidated hard.
   */
  tagStates?(tags: string[], floors: number[]): Promise<TagState[]>;
  /**
   * Gives `tags` new versions, above their current ones, `floors` and the store's clock in
   * microseconds (see core/tag-versions.ts); returns them. With `mode` 'soft', the tags' hard
   * floors stay where they were (see `tagStates`).
   */
  bumpTags?(tags: string[], floors: number[], mode?: InvalidationMode): Promise<number[]>;

  /** Resolves when the backend answers. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Who loads a key: a lock per key, and notifications of its fill or release to the waiters. */
export interface LockStore {
  /**
   * The cached value if present, else the lock (`SET NX PX` with `token`), else the lock's
   * remaining TTL (-1 when not known). With `waiting` (the caller holds a ready watch on the key),
   * the caller is also registered as a waiter, so the holder's fill or release notifies it.
   * A first attempt (not `waiting`) comes right after a read that missed: a store may skip the
   * value there, provided a value filled since makes the attempt `busy`, not `locked` (the
   * caller then reads it on its waiting attempt).
   */
  readOrLock<T>(
    key: string,
    token: string,
    lockTtlMs: number,
    waiting?: boolean,
  ): Promise<ReadOrLockResult<T>>;
  /**
   * Takes the lock if free (early recomputation). With `current`, only while the stored value is
   * still that envelope: a value refreshed meanwhile by another caller is not recomputed again.
   */
  tryLock(key: string, token: string, lockTtlMs: number, current?: Envelope): Promise<boolean>;
  /** Resets the lock's TTL if `token` still holds it. */
  extendLock(key: string, token: string, lockTtlMs: number): Promise<boolean>;
  /** Deletes the lock if `token` still holds it, and wakes waiters. */
  unlock(key: string, token: string): Promise<boolean>;
  /**
   * Stores the value; with `token`, also releases that lock and wakes waiters, in one step.
   * `raw` is the envelope already encoded with the store's `codec`, when the caller has it.
   */
  fill(key: string, envelope: Envelope, ttlMs: number, token?: string, raw?: string): Promise<void>;

  /** Listens for the next fill or release of `key`'s lock. Wait for `ready`, then read, to miss nothing. */
  watch(key: string): FillWatch;
  /** False while notifications cannot be received (subscriber down): waiters then poll. */
  notificationsLive(): boolean;
}

/**
 * How instances tell each other what to drop from their in-process tier. Stores that are not
 * distributed leave it all out.
 */
export interface InvalidationBus {
  /** Sends an invalidation to the other instances (they apply it to their L1 and tag versions). */
  broadcast?(message: InvalidationMessage): Promise<void>;
  /**
   * Deletes `key` and tells the other instances (`{ keys: [key] }`) in one atomic step, so that
   * a delete carried out late (after the call timed out) is broadcast too. A distributed store
   * should have it; without it the flow deletes, then broadcasts.
   */
  invalidate?(key: string): Promise<void>;
  /**
   * Receives the other instances' invalidations. `reset` is called when some may have been
   * missed (the subscriber connection came back): drop what they would have invalidated.
   * `busChanged` is called when invalidations stop reaching this process (with the time they
   * stopped) and when they reach it again (undefined, after `reset`).
   */
  onInvalidation?(
    listener: (message: InvalidationMessage) => void,
    reset: () => void,
    busChanged?: (downSince: number | undefined) => void,
  ): void;
  /** Since when invalidations cannot be received (epoch ms); undefined while they can. */
  invalidationsDownSince?(): number | undefined;
  /**
   * Gives `tags` new versions (as `bumpTags`) and tells the other instances
   * (`{ tags: { [tag]: version } }`) in one atomic step per tag, so that a version set late
   * (after the call timed out) is broadcast too, and delivered to this process's listeners. A
   * distributed store should have it; without it the flow bumps, then broadcasts.
   */
  invalidateTags?(tags: string[], floors: number[], mode?: InvalidationMode): Promise<number[]>;
  /**
   * Stores the value and tells the other instances (`{ keys: [key] }`) in one atomic step, as
   * `invalidate` does for a delete. Without it the flow stores, then broadcasts.
   */
  replace?(key: string, envelope: Envelope, ttlMs: number, raw?: string): Promise<void>;
  /**
   * Makes the stored value of `key` stale at `at` (epoch ms) if it is fresh then: its expiry
   * moves to `at` and it is kept for its grace (`g`) from there; a value without grace is
   * deleted. Tells the other instances (`{ keys: [key] }`) in the same step. Without it the flow
   * reads, writes back, then broadcasts.
   */
  expire?(key: string, at: number): Promise<void>;
}

/**
 * What the flow needs from a cache backend: a value store, a lock store and an invalidation bus.
 * Implementations: Redis (distributed), in-memory (one process) and cache-manager (its cache);
 * the last two are values-only stores with locks in this process (LocallyLockedStore).
 */
export interface StampedeStore extends ValueStore, LockStore, InvalidationBus {}
