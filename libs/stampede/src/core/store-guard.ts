import type { EngineLogger } from './call';
import { messageOf } from './call';
import type { Clock } from './clock';
import type { StampedeEvents } from './events';
import type { MethodMetrics } from './metrics';

const WARNING_INTERVAL_MS = 10_000;

/**
 * Whether the store answers, as the flow sees it: each failure is counted and warned about (at
 * most once per 10 s), and the transitions down and back up are events, once each.
 *
 * A call reads `down` before it starts and calls `answered()` after it succeeds: only an
 * operation that started while the store was failing proves that it is back.
 */
export class StoreGuard {
  /** Since when the store fails (a failure after a success); undefined while it answers. */
  private downSince: number | undefined;
  private lastWarning = 0;

  constructor(
    private readonly store: string,
    private readonly clock: Clock,
    private readonly events: StampedeEvents,
    private readonly logger?: EngineLogger,
  ) {}

  get down(): boolean {
    return this.downSince !== undefined;
  }

  /** `outcome` says what the call did without the store, for the warning. */
  failed(err: unknown, m: MethodMetrics, outcome: string): void {
    m.storeErrors++;
    const now = this.clock.now();
    const message = messageOf(err);
    if (now - this.lastWarning >= WARNING_INTERVAL_MS) {
      this.lastWarning = now;
      this.logger?.warn(`${this.store} store unavailable (${message}); ${outcome}`);
    }
    if (this.downSince === undefined) {
      // Edge-triggered: one event per transition, however many calls fail meanwhile.
      this.downSince = now;
      this.events.emit('stampede.store.unavailable', { store: this.store, error: message });
    }
  }

  /** A store operation that started while the store was failing has succeeded: it is back. */
  answered(): void {
    const since = this.downSince;
    if (since === undefined) return;
    this.downSince = undefined;
    this.events.emit('stampede.store.recovered', {
      store: this.store,
      downMs: Math.max(0, this.clock.now() - since),
    });
  }
}
