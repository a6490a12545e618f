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

/** One operation in flight: settled by its reply, or abandoned at its deadline. */
class PendingOp<T> {
  settled = false;
  readonly promise: Promise<T>;
  private resolve!: (value: T) => void;
  private reject!: (err: unknown) => void;

  constructor(
    source: Promise<T>,
    readonly deadline: number,
    readonly what: string,
    readonly stalls: boolean,
    private readonly onAbandoned: ((late: T) => void) | undefined,
    private readonly mapError: ((err: unknown) => unknown) | undefined,
    /** Called once settled: lets the guard drop settled operations from the front of its queue. */
    private readonly onSettled: () => void,
  ) {
    this.promise = new Promise<T>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    source.then(
      (value) => this.answered(value),
      (err: unknown) => this.failed(err),
    );
  }

  abandon(reason: string): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(new StoreUnavailableError(reason, undefined, true)); // sent: it may still run
  }

  private answered(value: T): void {
    if (this.settled) {
      this.onAbandoned?.(value); // a reply after the caller gave up
      return;
    }
    this.settled = true;
    this.resolve(value);
    this.onSettled();
  }

  private failed(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(this.mapError ? this.mapError(err) : err);
    this.onSettled();
  }
}

/**
 * Bounds a store's operations in time: each one by `timeoutMs`, and after a timeout none at all
 * for `cooldownMs` (the cool-down), so that a stalled backend costs one timeout, not one per call.
 * The first operation that times out gives up the others in flight too: they were sent to the
 * same stalled server, and each waiting out its own timeout would hold its caller up to twice as
 * long.
 *
 * Operations share one timer: they all have the same timeout, so their deadlines come in the
 * order they were sent, and the timer is set for the oldest one still in flight.
 */
export class OperationGuard {
  private downUntil = 0;
  /** Operations in the order they were sent; settled ones leave from the front. */
  private readonly pending: PendingOp<unknown>[] = [];
  private timer: unknown;
  private timerAt = Infinity;
  /** Replies come in the order commands were sent: settled operations leave at once. */
  private readonly trim = () => {
    while (this.pending.length > 0 && this.pending[0].settled) this.pending.shift();
  };

  constructor(private readonly options: OperationGuardOptions) {}

  /** Throws while in the cool-down: the operation is not sent. */
  check(): void {
    const refused = this.refusal();
    if (refused) throw refused;
  }

  /** The error of an operation that must not be sent now (the cool-down), or undefined. */
  refusal(): StoreUnavailableError | undefined {
    if (this.options.clock.now() < this.downUntil) {
      return new StoreUnavailableError(
        `${this.options.backend} timed out recently; skipping it for a moment`,
      );
    }
    return undefined;
  }

  /** How long operations still skip the backend (the cool-down), in ms; 0 when they don't. */
  cooldownRemainingMs(): number {
    return Math.max(0, this.downUntil - this.options.clock.now());
  }

  /**
   * `promise` within the timeout, else a StoreUnavailableError (the operation was sent: it may
   * still be carried out). `onAbandoned` gets the reply of an operation that answered after its
   * timeout. With `stallsOthers`, a timeout starts the cool-down and gives up the others that
   * stall too. `mapError` turns the operation's own failure into the caller's error.
   */
  bound<T>(
    promise: Promise<T>,
    what: string,
    onAbandoned?: (late: T) => void,
    stallsOthers = false,
    mapError?: (err: unknown) => unknown,
  ): Promise<T> {
    const deadline = this.options.clock.now() + this.options.timeoutMs;
    const op = new PendingOp(
      promise,
      deadline,
      what,
      stallsOthers,
      onAbandoned,
      mapError,
      this.trim,
    );
    this.pending.push(op as PendingOp<unknown>);
    if (this.timerAt === Infinity) this.arm(deadline);
    return op.promise;
  }

  private arm(at: number): void {
    this.timerAt = at;
    this.timer = this.options.clock.setTimer(
      () => this.expire(),
      Math.max(0, at - this.options.clock.now()),
    );
  }

  /** Abandons the operations past their deadline; the first that stalls gives up the others. */
  private expire(): void {
    this.timerAt = Infinity;
    const { clock, backend, timeoutMs } = this.options;
    const now = clock.now();
    let stalled = false;
    while (this.pending.length > 0) {
      const op = this.pending[0];
      if (!op.settled && op.deadline > now) break;
      this.pending.shift();
      if (op.settled) continue;
      if (stalled && op.stalls) op.abandon(`${backend} stalled: a call before this one timed out`);
      else op.abandon(`${backend} ${op.what} took longer than ${timeoutMs} ms`);
      if (op.stalls) stalled = true;
    }
    if (stalled) {
      this.downUntil = now + this.options.cooldownMs;
      for (const op of this.pending)
        if (op.stalls) op.abandon(`${backend} stalled: a call before this one timed out`);
      let kept = 0;
      for (const op of this.pending) if (!op.settled) this.pending[kept++] = op;
      this.pending.length = kept;
    }
    this.trim();
    if (this.pending.length > 0) this.arm(this.pending[0].deadline);
  }
}
