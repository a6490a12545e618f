import type { StampedeEvents } from './events';
import type { L1Limits } from './l1-cache';
import type { StampedeStore } from './store';

export const DEFAULT_MAX_STALE_MS = 5000;

/**
 * Whether this process receives the other instances' invalidations, and what it may trust
 * meanwhile. While the bus is down, an invalidation sent elsewhere is missed, so an L1 entry,
 * and a tag version known here (with L1 or without), is trusted for at most `maxStaleMs` after
 * the later of the moment the bus went down (it missed nothing before) and the moment it was
 * last read from the store. An older one is read from the store again, which renews it.
 */
export class InvalidationBusWatch {
  private downSince: number | undefined;
  private reported = false;
  private readonly store: string;
  /** `l1.maxStaleMs`; the default without L1, where it bounds the tag versions alone. */
  private readonly maxStaleMs: number;
  private readonly hasL1: boolean;

  /** Starts from the store's state, without an event (nobody listens yet). */
  constructor(
    private readonly events: StampedeEvents,
    store: Pick<StampedeStore, 'name' | 'invalidationsDownSince'>,
    l1: L1Limits | undefined,
    private readonly logger?: { warn(message: string): void },
  ) {
    this.store = store.name;
    this.maxStaleMs = l1?.maxStaleMs ?? DEFAULT_MAX_STALE_MS;
    this.hasL1 = l1 !== undefined;
    this.downSince = store.invalidationsDownSince?.();
  }

  /** The bus went down at `downSince`, or (undefined) is up again; events once per transition. */
  changed(downSince: number | undefined, now: number): void {
    if (downSince !== undefined) {
      if (this.downSince !== undefined) return;
      this.downSince = downSince;
      this.reported = true;
      this.logger?.warn(
        `${this.store} invalidation bus down: invalidations from other instances are missed until it reconnects` +
          `; ${this.hasL1 ? 'in-process values and tag versions are' : 'tag versions are'} read ` +
          `from the store again once ${this.maxStaleMs} ms old (l1.maxStaleMs)`,
      );
      this.events.emit('stampede.bus.down', { store: this.store });
      return;
    }
    const since = this.downSince;
    if (since === undefined) return;
    this.downSince = undefined;
    if (!this.reported) return;
    this.reported = false;
    this.events.emit('stampede.bus.up', { store: this.store, downMs: Math.max(0, now - since) });
  }

  /**
   * The time an L1 entry or a tag version must have been read from the store after to be trusted
   * at `now`; undefined when all may be (the bus is up, or went down less than `maxStaleMs` ago).
   */
  verifiedAfter(now: number): number | undefined {
    const bound = this.maxStaleMs;
    if (this.downSince === undefined || now - this.downSince < bound) {
      return undefined;
    }
    return now - bound;
  }
}
