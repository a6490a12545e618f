/**
 * Concurrent calls with the same key share one execution: every caller gets the same value or
 * the same error. Modelled on Go's golang.org/x/sync/singleflight.
 */
export class SingleFlight<T = unknown> {
  private readonly inFlight = new Map<string, Promise<T>>();

  /** Runs `fn` unless a call for `key` is in flight; `joined` tells whether this caller joined one. */
  run(key: string, fn: () => Promise<T>): { promise: Promise<T>; joined: boolean } {
    const existing = this.inFlight.get(key);
    if (existing) return { promise: existing, joined: true };
    const promise = new Promise<T>((resolve) => resolve(fn())).finally(() => {
      // After forget(key) a newer call may own the slot: only remove our own.
      if (this.inFlight.get(key) === promise) this.inFlight.delete(key);
    });
    this.inFlight.set(key, promise);
    return { promise, joined: false };
  }

  /** Later calls for `key` start a new execution instead of joining the one in flight. */
  forget(key: string): void {
    this.inFlight.delete(key);
  }

  has(key: string): boolean {
    return this.inFlight.has(key);
  }

  get size(): number {
    return this.inFlight.size;
  }
}
