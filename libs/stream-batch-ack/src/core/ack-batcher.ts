import { BackoffOptions, backoffDelay } from './backoff';
import { Clock, systemClock } from '@nest-redis-resilience/common';
import { AckFlushError } from './errors';

/** Ids per XACK when flushing at close (see flushStream). */
const CLOSE_CHUNK = 1000;

/** Sends one acknowledgement command for `ids` of `stream` (e.g. `XACK stream group ...ids`). */
export type AckFlushFn = (stream: string, ids: string[]) => Promise<unknown>;

export interface AckBatcherOptions {
  /** Flush a stream as soon as this many ids wait. Default 500. */
  batchSize?: number;
  /** Flush a stream at the latest this long after its oldest queued id arrived. Default 50. */
  intervalMs?: number;
  /** Retry schedule of a failed flush. */
  backoff?: BackoffOptions;
  clock?: Clock;
  random?: () => number;
  /** Called for every failed flush (the ids stay queued). */
  onError?: (error: AckFlushError) => void;
  /** Called after every successful flush. */
  onFlush?: (stream: string, ids: readonly string[]) => void;
}

/** A FIFO of ids: taking from the front is O(1) (no array shift per flush of a long queue). */
class IdQueue {
  private items: string[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(id: string): void {
    this.items.push(id);
  }

  /** The first `n` ids (a copy). */
  peek(n: number): string[] {
    return this.items.slice(this.head, this.head + n);
  }

  /** Removes the first `n` ids. */
  drop(n: number): void {
    this.head += Math.min(n, this.length);
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}

interface StreamQueue {
  ids: IdQueue;
  set: Set<string>;
  /** When the oldest id of `ids` was queued. */
  oldestAt: number;
  /** A flush of this stream is running. */
  flushing: Promise<void> | null;
  /** Consecutive failed flushes. */
  failures: number;
  /** No flush before this time (backoff after a failure). */
  retryAt: number;
}

/**
 * Collects the ids of processed messages and acknowledges them in batches: per stream, one
 * flush call when `batchSize` ids wait or `intervalMs` passed since the oldest. A failed flush
 * keeps its ids (in order, at the front) and is retried with exponential backoff. Ids are only
 * removed from the queue after their flush succeeded.
 */
export class AckBatcher {
  private readonly queues = new Map<string, StreamQueue>();
  private readonly batchSize: number;
  private readonly intervalMs: number;
  private readonly clock: Clock;
  private timer: unknown = null;
  private timerAt = Infinity;
  private closed = false;
  private closing = false;
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly flushFn: AckFlushFn,
    private readonly options: AckBatcherOptions = {},
  ) {
    this.batchSize = Math.max(1, options.batchSize ?? 500);
    this.intervalMs = Math.max(0, options.intervalMs ?? 50);
    this.clock = options.clock ?? systemClock;
  }

  /** Ids queued and not yet acknowledged, over all streams (including a flush under way). */
  get size(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.ids.length;
    return n;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  has(stream: string, id: string): boolean {
    return this.queues.get(stream)?.set.has(id) ?? false;
  }

  /** The ids queued per stream, a flush under way included (they leave once their XACK succeeded). */
  *queued(): IterableIterator<[stream: string, ids: ReadonlySet<string>]> {
    for (const [stream, q] of this.queues) if (q.set.size > 0) yield [stream, q.set];
  }

  /** Queues one id. Duplicates are ignored. Returns false when the batcher is closed and nothing was queued. */
  add(stream: string, id: string): boolean {
    if (this.closed && !this.closing) return false;
    let q = this.queues.get(stream);
    if (!q) {
      q = {
        ids: new IdQueue(),
        set: new Set(),
        oldestAt: 0,
        flushing: null,
        failures: 0,
        retryAt: 0,
      };
      this.queues.set(stream, q);
    }
    if (q.set.has(id)) return true;
    if (q.ids.length === 0) q.oldestAt = this.clock.now();
    q.ids.push(id);
    q.set.add(id);
    if (q.ids.length >= this.batchSize && !q.flushing && q.retryAt <= this.clock.now()) {
      void this.flushStream(stream, q, false);
    } else if (!q.flushing && (q.ids.length === 1 || this.timer === null)) {
      // A queue falls due by its oldest id (or its retry time): later ids do not move the timer.
      // While it flushes, the flush's end schedules it (until then no timer is armed for it, and
      // scheduling on every id that arrives meanwhile would cost a pass over the queues per id).
      this.schedule();
    }
    return true;
  }

  /** Calls `fn` whenever ids were acknowledged; returns an unsubscribe function. */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Flushes every queued id now, once (failures stay queued and are retried later). */
  async flush(): Promise<void> {
    const runs: Promise<void>[] = [];
    for (const [stream, q] of this.queues) {
      runs.push(
        q.flushing
          ? q.flushing.then(() => this.flushStream(stream, q, true))
          : this.flushStream(stream, q, true),
      );
    }
    await Promise.all(runs);
  }

  /**
   * Stops the timer and flushes everything, retrying failures with backoff until every id is
   * acknowledged or `timeoutMs` passed. Resolves with the number of ids left unacknowledged
   * (0 unless Redis stayed unreachable; those messages stay pending in Redis and are delivered again).
   */
  async close(timeoutMs = 5000): Promise<number> {
    if (this.closed) return this.size;
    this.closed = true;
    this.closing = true;
    this.cancelTimer();
    const deadline = this.clock.now() + timeoutMs;
    try {
      while (this.size > 0) {
        const left = deadline - this.clock.now();
        if (left <= 0) break;
        let timer: unknown;
        await Promise.race([
          this.flush(),
          new Promise<void>((resolve) => (timer = this.clock.setTimer(resolve, left))),
        ]);
        this.clock.clearTimer(timer);
        if (this.size === 0) break;
        const now = this.clock.now();
        if (now >= deadline) break;
        let wakeAt = deadline;
        for (const q of this.queues.values())
          if (q.ids.length > 0) wakeAt = Math.min(wakeAt, Math.max(q.retryAt, now));
        await new Promise<void>((resolve) =>
          this.clock.setTimer(resolve, Math.max(1, wakeAt - now)),
        );
      }
    } finally {
      this.closing = false;
    }
    return this.size;
  }

  /**
   * Sends the due ids of one stream, one XACK-sized chunk at a time. `all` (flush(), close(), the
   * interval timer) sends the ids queued when it started; ids that arrive during its round trips
   * wait for their own size or interval trigger. Otherwise a steady trickle would keep a flush
   * running forever as a string of tiny XACKs, one per round trip.
   */
  private async flushStream(stream: string, q: StreamQueue, all: boolean): Promise<void> {
    if (q.flushing) return q.flushing;
    let owed = all ? q.ids.length : 0;
    const run = (async () => {
      while (q.ids.length > 0) {
        // At close, what is left goes in large XACKs: a small batchSize must not turn a
        // shutdown into thousands of round trips that outlast the shutdown timeout.
        const chunk = q.ids.peek(
          this.closing ? Math.max(this.batchSize, CLOSE_CHUNK) : this.batchSize,
        );
        try {
          await this.flushFn(stream, chunk);
        } catch (err) {
          q.failures += 1;
          q.retryAt =
            this.clock.now() + backoffDelay(q.failures, this.options.backoff, this.options.random);
          this.options.onError?.(new AckFlushError(stream, chunk, q.failures, err));
          return;
        }
        q.failures = 0;
        q.retryAt = 0;
        q.ids.drop(chunk.length);
        for (const id of chunk) q.set.delete(id);
        // The ids left behind arrived after the flushed ones: restart their clock now.
        if (q.ids.length > 0) q.oldestAt = this.clock.now();
        owed -= chunk.length;
        this.options.onFlush?.(stream, chunk);
        this.notify();
        if (owed <= 0 && q.ids.length < this.batchSize) return;
      }
    })();
    q.flushing = run;
    try {
      await run;
    } finally {
      q.flushing = null;
      if (!this.closed) this.schedule();
    }
  }

  private notify(): void {
    for (const fn of this.listeners) {
      try {
        fn();
      } catch {
        // a listener must not break flushing
      }
    }
  }

  /** Arms one timer for the earliest stream that falls due (interval or retry). */
  private schedule(): void {
    if (this.closed) return;
    let dueAt = Infinity;
    for (const q of this.queues.values()) {
      if (q.ids.length === 0 || q.flushing) continue;
      const at =
        q.failures > 0
          ? q.retryAt
          : q.ids.length >= this.batchSize
            ? q.retryAt
            : q.oldestAt + this.intervalMs;
      dueAt = Math.min(dueAt, at);
    }
    if (dueAt === Infinity) {
      this.cancelTimer();
      return;
    }
    if (this.timer !== null && this.timerAt <= dueAt) return;
    this.cancelTimer();
    this.timerAt = dueAt;
    this.timer = this.clock.setTimer(() => this.onTimer(), Math.max(0, dueAt - this.clock.now()));
  }

  private cancelTimer(): void {
    if (this.timer !== null) this.clock.clearTimer(this.timer);
    this.timer = null;
    this.timerAt = Infinity;
  }

  private onTimer(): void {
    this.timer = null;
    this.timerAt = Infinity;
    const now = this.clock.now();
    for (const [stream, q] of this.queues) {
      if (q.ids.length === 0 || q.flushing) continue;
      const due =
        q.failures > 0
          ? q.retryAt <= now
          : q.ids.length >= this.batchSize || q.oldestAt + this.intervalMs <= now;
      if (due) void this.flushStream(stream, q, true);
    }
    this.schedule();
  }
}
