import { Clock, systemClock } from '@nest-redis-resilience/common';

/**
 * How many more entries the server may take now, and the waits of its loops.
 *
 * Room is bounded twice: by `concurrency` (entries whose handler runs) and by `maxPending`
 * (entries not acknowledged yet: running, or done and waiting for their batched XACK).
 */
export class FlowGate {
  private running = 0;
  private closed = false;
  private readonly progressWaiters = new Set<() => void>();
  private readonly closeWaiters = new Set<() => void>();

  constructor(
    private readonly limits: { concurrency: number; maxPending: number },
    private readonly queuedAcks: () => number,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Entries taken and not yet released. */
  get inFlight(): number {
    return this.running;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  room(): number {
    const unacked = this.queuedAcks() + this.running;
    return Math.max(
      0,
      Math.min(this.limits.concurrency - this.running, this.limits.maxPending - unacked),
    );
  }

  take(n: number): void {
    this.running += n;
  }

  release(n: number): void {
    this.running -= n;
    if (this.progressWaiters.size > 0) this.progress();
  }

  /** Wakes the loops waiting for room (a handler finished, acks were sent). */
  progress(): void {
    const waiters = [...this.progressWaiters];
    this.progressWaiters.clear();
    for (const w of waiters) w();
  }

  /** Ends every wait now and for good. */
  close(): void {
    this.closed = true;
    this.progress();
    for (const w of [...this.closeWaiters]) w();
  }

  /**
   * Resolves after `ms`, or earlier on close(); with `untilProgress`, also on the next progress()
   * (the read loop waits for room that way).
   */
  wait(ms: number, untilProgress = true): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const { progressWaiters, closeWaiters, clock } = this;
      const timer = clock.setTimer(done, ms);
      const waiter = (): void => done();
      function done(): void {
        clock.clearTimer(timer);
        progressWaiters.delete(waiter);
        closeWaiters.delete(waiter);
        resolve();
      }
      closeWaiters.add(waiter);
      if (untilProgress) progressWaiters.add(waiter);
    });
  }
}
