import type { Envelope } from './envelope';
import type { Call, LockOutcome, Outcome } from './call';

/** Values served stale after a failed refresh within grace (see `StampedeEngine#failSafeState`). */
export interface StampedeFailSafeState {
  /** How many keys (at most 10,000 are tracked). */
  keys: number;
  /** Their methods (`Class.method`, or getOrLoad names), sorted; at most 10. */
  methods: string[];
  /** When the oldest of them was first served stale after a failed refresh (epoch ms). */
  since: number;
}

/** What this process is doing about one key; a record lives while any field is set. */
export interface KeyState {
  /** The whole call, shared by concurrent callers (single-flight), and its flow. */
  call?: Promise<Outcome<unknown>>;
  callOwner?: Call<unknown>;
  /** The lock path (attempt, wait, load), shared by this process's lock-path callers. */
  lock?: Promise<LockOutcome<unknown>>;
  /** A store read shared by lock-path callers (the first read, and the read after a fill). */
  read?: Promise<Envelope<unknown> | undefined>;
  /** A load while the store is unreachable: one per key at a time, whatever the policy. */
  fallback?: Promise<unknown>;
  /** A background refresh's load: a caller that misses meanwhile joins it. */
  refreshLoad?: Promise<unknown>;
  /** A background refresh runs here, or another instance owns it (then until a quiet time ends). */
  refreshing?: boolean;
  /** After a failed refresh, no new attempt on the key before this time. */
  retryAt?: number;
  /** Served stale because its refresh within grace failed (fail-safe), since when, until when. */
  failSafe?: { method: string; since: number; until: number };
}

/** The fields of KeyState that share one run among concurrent callers. */
export type SharedSlot = 'lock' | 'read' | 'fallback';
type SlotValue<S extends SharedSlot> = NonNullable<KeyState[S]>;

export const MAX_FAIL_SAFE_KEYS = 10_000;
const MAX_FAIL_SAFE_METHODS = 10;
const MAX_BACKOFFS = 10_000;

/**
 * Per-key state of the engine: one map of one record per key, dropped as soon as it is empty.
 * Shared runs follow Go's singleflight: every caller of a run gets the same value or error, and
 * `forget` makes later callers start a new one.
 */
export class KeyStates {
  private readonly states = new Map<string, KeyState>();
  private failSafes = 0;
  private backoffs = 0;

  get(key: string): KeyState | undefined {
    return this.states.get(key);
  }

  /** Number of keys with state (for tests and bounds). */
  get size(): number {
    return this.states.size;
  }

  /** Runs `fn` unless a run of `slot` is in flight for `key`; `joined` tells which happened. */
  share<S extends SharedSlot>(
    key: string,
    slot: S,
    fn: () => SlotValue<S>,
  ): { promise: SlotValue<S>; joined: boolean } {
    let state = this.states.get(key);
    const running = state?.[slot];
    if (running) return { promise: running as SlotValue<S>, joined: true };
    if (!state) {
      state = {};
      this.states.set(key, state);
    }
    let started: Promise<unknown>;
    try {
      started = fn();
    } catch (err) {
      started = Promise.reject(err);
    }
    const promise = started.finally(() => {
      // After forget(key) a newer run may own the slot: only clear our own.
      const current = this.states.get(key);
      if (current && current[slot] === promise) {
        current[slot] = undefined;
        this.tidy(key, current);
      }
    }) as SlotValue<S>;
    state[slot] = promise;
    return { promise, joined: false };
  }

  /** The call in flight for `key`, for a caller to join. */
  callOf(key: string): Promise<Outcome<unknown>> | undefined {
    return this.states.get(key)?.call;
  }

  /**
   * `promise` is the flow of `owner`, which callers of `key` join until it calls `endCall` (no
   * `finally` per call: the flow ends it itself). A flow already finished is not set.
   */
  setCall<T>(key: string, promise: Promise<Outcome<T>>, owner: Call<T>): void {
    if (owner.done) return;
    const state = this.of(key);
    state.call = promise as Promise<Outcome<unknown>>;
    state.callOwner = owner as Call<unknown>;
  }

  endCall(key: string, owner: Call<unknown>): void {
    owner.done = true;
    const state = this.states.get(key);
    if (!state || state.callOwner !== owner) return;
    state.call = state.callOwner = undefined;
    this.tidy(key, state);
  }

  /** Later callers of `key` start new runs instead of joining the ones in flight; fail-safe ends. */
  forget(key: string): void {
    const state = this.states.get(key);
    if (!state) return;
    state.call = state.callOwner = state.lock = state.read = undefined;
    this.clearFailSafe(key);
    this.tidy(key, state);
  }

  /** Marks a background refresh of `key` as running (or owned elsewhere); false if one already is. */
  startRefresh(key: string): boolean {
    const state = this.of(key);
    if (state.refreshing) return false;
    state.refreshing = true;
    return true;
  }

  endRefresh(key: string): void {
    const state = this.states.get(key);
    if (!state) return;
    state.refreshing = undefined;
    this.tidy(key, state);
  }

  isRefreshing(key: string): boolean {
    return this.states.get(key)?.refreshing === true;
  }

  setRefreshLoad(key: string, load: Promise<unknown> | undefined): void {
    const state = load ? this.of(key) : this.states.get(key);
    if (!state) return;
    state.refreshLoad = load;
    if (!load) this.tidy(key, state);
  }

  /** Whether refreshes of `key` still back off at `now` after a failure. */
  backingOff(key: string, now: number): boolean {
    return (this.states.get(key)?.retryAt ?? 0) > now;
  }

  /** No refresh of `key` before `until`; undefined ends the backoff. */
  backOff(key: string, until: number | undefined): void {
    if (until !== undefined && this.backoffs >= MAX_BACKOFFS) {
      for (const [k, s] of this.states) if (s.retryAt !== undefined) this.setRetry(k, s, undefined);
    }
    const state = until === undefined ? this.states.get(key) : this.of(key);
    if (state) this.setRetry(key, state, until);
  }

  /** `key` is served stale after a failed refresh, until `until` (the end of its grace). */
  noteFailSafe(key: string, method: string, now: number, until: number): void {
    const state = this.of(key);
    const since = state.failSafe?.since ?? now;
    if (!state.failSafe && this.failSafes >= MAX_FAIL_SAFE_KEYS) this.dropOldestFailSafe();
    if (!state.failSafe) this.failSafes++;
    state.failSafe = { method, since, until };
  }

  /** A value of `key` was loaded or read fresh: it is no longer served stale. Cheap when none is. */
  clearFailSafe(key: string): void {
    if (this.failSafes === 0) return;
    const state = this.states.get(key);
    if (!state?.failSafe) return;
    state.failSafe = undefined;
    this.failSafes--;
    this.tidy(key, state);
  }

  /** The keys served stale at `now` after a failed refresh, or undefined when there are none. */
  failSafeState(now: number): StampedeFailSafeState | undefined {
    if (this.failSafes === 0) return undefined;
    const methods = new Set<string>();
    let since = Infinity;
    for (const [key, state] of this.states) {
      const entry = state.failSafe;
      if (!entry) continue;
      if (entry.until <= now) {
        this.clearFailSafe(key);
        continue;
      }
      methods.add(entry.method);
      since = Math.min(since, entry.since);
    }
    if (this.failSafes === 0) return undefined;
    return {
      keys: this.failSafes,
      methods: [...methods].sort().slice(0, MAX_FAIL_SAFE_METHODS),
      since,
    };
  }

  private of(key: string): KeyState {
    let state = this.states.get(key);
    if (!state) {
      state = {};
      this.states.set(key, state);
    }
    return state;
  }

  private setRetry(key: string, state: KeyState, until: number | undefined): void {
    if (state.retryAt === undefined && until !== undefined) this.backoffs++;
    if (state.retryAt !== undefined && until === undefined) this.backoffs--;
    state.retryAt = until;
    if (until === undefined) this.tidy(key, state);
  }

  /** The fail-safe key whose last failure is oldest goes, to keep at most MAX_FAIL_SAFE_KEYS. */
  private dropOldestFailSafe(): void {
    let oldest: string | undefined;
    let at = Infinity;
    for (const [key, state] of this.states) {
      if (state.failSafe && state.failSafe.since < at) {
        at = state.failSafe.since;
        oldest = key;
      }
    }
    if (oldest !== undefined) this.clearFailSafe(oldest);
  }

  private tidy(key: string, state: KeyState): void {
    if (
      state.call === undefined &&
      state.lock === undefined &&
      state.read === undefined &&
      state.fallback === undefined &&
      state.refreshLoad === undefined &&
      state.refreshing === undefined &&
      state.retryAt === undefined &&
      state.failSafe === undefined &&
      this.states.get(key) === state
    ) {
      this.states.delete(key);
    }
  }
}
