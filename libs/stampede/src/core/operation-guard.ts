import type { Clock } from './clock';
import { StoreUnavailableError } from './errors';

export interface OperationGuardOptions {
  /** Longest wait for one operation (ms). */
  timeoutMs: number;
  /** After a timeout, skip the backend for this long (ms). */
  cooldownMs: number;
  clock: Clock;
  /** The backend's name in error messages. */
  backend: string;
}

/**
 * Bounds a store's operations in time: each one by `timeoutMs`, and after a timeout none at all
 * for `cooldownMs` (the cool-down), so that a stalled backend costs one timeout, not one per call.
 * The first operation that times out gives up the others in flight too: they were sent to the
 * same stalled server, and each waiting out its own timeout would hold its caller up to twice as
 * long.
 */
export class OperationGuard {
  private downUntil = 0;
  /** Gives up one operation in flight. */
  private readonly inFlight = new Set<(reason: string) => void>();

  constructor(private readonly options: OperationGuardOptions) {}

  /** Throws while in the cool-down: the operation is not sent. */
  check(): void {
    if (this.options.clock.now() < this.downUntil) {
      throw new StoreUnavailableError(
        `${this.options.backend} timed out recently; skipping it for a moment`,
      );
    }
  }

  /** How long operations still skip the backend (the cool-down), in ms; 0 when they don't. */
  cooldownRemainingMs(): number {
    return Math.max(0, this.downUntil - this.options.clock.now());
  }

  /**
   * `promise` within the timeout, else a StoreUnavailableError (the operation was sent: it may
   * still be carried out). `onAbandoned` gets the reply of an operation that answered after its
   * timeout. With `stallsOthers`, a timeout starts the cool-down and gives up the others.
   */
  bound<T>(
    promise: Promise<T>,
    what: string,
    onAbandoned?: (late: T) => void,
    stallsOthers = false,
  ): Promise<T> {
    const { clock, timeoutMs, backend } = this.options;
    promise.catch(() => undefined); // a late rejection after the timeout is not unhandled
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const abandon = (reason: string) => {
        if (settled) return;
        settled = true;
        this.inFlight.delete(abandon);
        clock.clearTimer(timer);
        if (onAbandoned) promise.then(onAbandoned, () => undefined);
        reject(new StoreUnavailableError(reason, undefined, true)); // sent: it may still run
      };
      const timer = clock.setTimer(() => {
        abandon(`${backend} ${what} took longer than ${timeoutMs} ms`);
        if (stallsOthers) this.stalled();
      }, timeoutMs);
      if (stallsOthers) this.inFlight.add(abandon);
      const settle = () => {
        if (settled) return false;
        settled = true;
        clock.clearTimer(timer);
        this.inFlight.delete(abandon);
        return true;
      };
      promise.then(
        (value) => {
          if (settle()) resolve(value);
        },
        (err: unknown) => {
          if (settle()) reject(err);
        },
      );
    });
  }

  /** The backend did not answer in time: skip it for the cool-down, and give up the calls on it. */
  private stalled(): void {
    this.downUntil = this.options.clock.now() + this.options.cooldownMs;
    for (const abandon of [...this.inFlight])
      abandon(`${this.options.backend} stalled: a call before this one timed out`);
  }
}
