/** Counters of one decorated method (or one `getOrLoad` name). All counts since start-up. */
export interface MethodMetrics {
  /** Calls of the method. */
  calls: number;
  /** Calls answered from the cache. */
  hits: number;
  /** Calls that found no cached value. */
  misses: number;
  /** Loader executions. */
  loads: number;
  /** Calls that joined an execution already in flight in this process (single-flight). */
  joins: number;
  /** Times a caller waited for another instance's lock. */
  lockWaits: number;
  /** Total ms spent waiting for locks. */
  lockWaitMs: number;
  /** Waits that gave up after `wait` ms and loaded without the lock. */
  lockTimeouts: number;
  /** XFetch recomputations started before expiry. */
  earlyRecomputes: number;
  /** Calls answered from the in-process tier (L1), without a store round trip; part of `hits`. */
  l1Hits: number;
  /** Calls served the current value while an early recomputation ran, or a stale value within grace. */
  staleServes: number;
  /** Refreshes within grace that failed or timed out: callers kept the stale value. */
  failSafes: number;
  /** Loads that passed the hard timeout: their callers got a StampedeTimeoutError. */
  timeouts: number;
  /** Loader errors. */
  errors: number;
  /** Store operations that failed (Redis down or slow); the call was answered by the loader. */
  storeErrors: number;
}

export type MetricName = keyof MethodMetrics;

export function emptyMetrics(): MethodMetrics {
  return {
    calls: 0,
    hits: 0,
    misses: 0,
    loads: 0,
    joins: 0,
    lockWaits: 0,
    lockWaitMs: 0,
    lockTimeouts: 0,
    earlyRecomputes: 0,
    l1Hits: 0,
    staleServes: 0,
    failSafes: 0,
    timeouts: 0,
    errors: 0,
    storeErrors: 0,
  };
}
