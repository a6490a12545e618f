/**
 * A source of time and timers, the same shape as stream-batch-ack's: the core and the stores take
 * one, so tests drive them with a ManualClock instead of waiting. Timers of the system clock never
 * keep the process alive (a cache must not hold up shutdown).
 */
export interface Clock {
  /** Milliseconds since the epoch (like Date.now()). */
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/** A source of uniform numbers in [0, 1), like Math.random. */
export type RandomSource = () => number;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer: (fn, ms) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return timer;
  },
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export const systemRandom: RandomSource = Math.random;

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
