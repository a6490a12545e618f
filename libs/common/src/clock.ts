/**
 * A source of time and timers. Pure code takes one, so that tests drive it with a ManualClock
 * instead of waiting; the default is the system clock.
 */
export interface Clock {
  /** Milliseconds since the epoch (like Date.now()). */
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/** Date.now() and setTimeout: a pending timer keeps the process alive, as setTimeout does. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer: (fn, ms) => setTimeout(fn, ms),
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/**
 * The system clock with timers that never keep the process alive (`unref`), for background work
 * that must not hold up shutdown (a cache's refresh, a poll).
 */
export const backgroundClock: Clock = {
  now: () => Date.now(),
  setTimer: (fn, ms) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return timer;
  },
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

/** A clock that only moves when told to: `advance(ms)` fires the timers that fall due, in order. */
export class ManualClock implements Clock {
  private current: number;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimer(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.current + Math.max(0, ms), fn });
    return id;
  }

  clearTimer(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Number of timers waiting to fire. */
  get pendingTimers(): number {
    return this.timers.size;
  }

  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      let nextId: number | undefined;
      let next: { at: number; fn: () => void } | undefined;
      for (const [id, t] of this.timers) {
        if (t.at <= target && (!next || t.at < next.at)) {
          next = t;
          nextId = id;
        }
      }
      if (!next || nextId === undefined) break;
      this.timers.delete(nextId);
      this.current = next.at;
      next.fn();
    }
    this.current = target;
  }
}
