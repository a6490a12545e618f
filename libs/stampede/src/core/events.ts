/**
 * What operators alert on, as typed events. Each is rare by construction: a lock wait that gave
 * up, a load past its hard timeout, a grace fail-safe, the store going away or coming back, and
 * the invalidation bus going down or up (once per transition, not once per failed command). Payloads name the method (`Class.method`
 * or the getOrLoad name), never a raw cache key.
 */

/** A lock wait gave up after `wait` ms; the caller loaded without the lock. */
export interface StampedeLockTimeoutEvent {
  method: string;
  /** The key's name pattern (`Class.method:*`), not the key. */
  keyPattern: string;
  waitedMs: number;
}

/** The store stopped answering (first failure after a success, or at start). */
export interface StampedeStoreUnavailableEvent {
  /** The store's name: `redis`, `memory`, `cache-manager`. */
  store: string;
  /** The message of the failure that revealed it. */
  error: string;
}

/** The store answered again after being unavailable. */
export interface StampedeStoreRecoveredEvent {
  store: string;
  /** How long it was unavailable, from the first failure to the first success. */
  downMs: number;
}

/** A load ran past its hard timeout: its callers got a StampedeTimeoutError. */
export interface StampedeLoadTimeoutEvent {
  method: string;
  keyPattern: string;
  timeoutMs: number;
}

/** A refresh within grace failed (error or timeout): callers keep getting the stale value. */
export interface StampedeFailSafeEvent {
  method: string;
  keyPattern: string;
  error: string;
}

/**
 * This instance stopped receiving the other instances' invalidations (its subscriber connection
 * is down). Meanwhile an L1 value is served for at most `l1.maxStaleMs` before it is read again.
 */
export interface StampedeBusDownEvent {
  store: string;
}

/** Invalidations reach this instance again; L1 was cleared (some may have been missed). */
export interface StampedeBusUpEvent {
  store: string;
  /** How long the bus was down. */
  downMs: number;
}

/** Event names and their payloads. */
export interface StampedeEventMap {
  'stampede.lock.timeout': StampedeLockTimeoutEvent;
  'stampede.store.unavailable': StampedeStoreUnavailableEvent;
  'stampede.store.recovered': StampedeStoreRecoveredEvent;
  'stampede.load.timeout': StampedeLoadTimeoutEvent;
  'stampede.failsafe': StampedeFailSafeEvent;
  'stampede.bus.down': StampedeBusDownEvent;
  'stampede.bus.up': StampedeBusUpEvent;
}

export type StampedeEventName = keyof StampedeEventMap;

export type StampedeEventListener<E extends StampedeEventName> = (
  payload: StampedeEventMap[E],
) => void;

/** The event names, for `on()` and `@OnEvent()`. */
export const STAMPEDE_EVENTS = {
  lockTimeout: 'stampede.lock.timeout',
  storeUnavailable: 'stampede.store.unavailable',
  storeRecovered: 'stampede.store.recovered',
  loadTimeout: 'stampede.load.timeout',
  failSafe: 'stampede.failsafe',
  busDown: 'stampede.bus.down',
  busUp: 'stampede.bus.up',
} as const satisfies Record<string, StampedeEventName>;

/**
 * A tiny typed emitter. Listeners run synchronously, in order; one that throws is reported to
 * `onListenerError` and does not stop the others, nor the call that raised the event. `sink`
 * (set by the Nest layer) also gets every event: the bridge to @nestjs/event-emitter.
 */
export class StampedeEvents {
  private readonly listeners = new Map<StampedeEventName, Set<(payload: never) => void>>();
  sink?: (event: StampedeEventName, payload: unknown) => void;

  constructor(private readonly onListenerError: (err: unknown) => void = () => undefined) {}

  on<E extends StampedeEventName>(event: E, listener: StampedeEventListener<E>): void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener);
  }

  off<E extends StampedeEventName>(event: E, listener: StampedeEventListener<E>): void {
    this.listeners.get(event)?.delete(listener);
  }

  emit<E extends StampedeEventName>(event: E, payload: StampedeEventMap[E]): void {
    const set = this.listeners.get(event);
    if (set) {
      for (const listener of [...set]) {
        try {
          (listener as StampedeEventListener<E>)(payload);
        } catch (err) {
          this.onListenerError(err);
        }
      }
    }
    if (this.sink) {
      try {
        this.sink(event, payload);
      } catch (err) {
        this.onListenerError(err);
      }
    }
  }
}

/**
 * The name pattern of a key, safe to export (no argument values): its first `:`-separated
 * segment when that looks like a name (`Class.method:"id"` and `user:42` give `Class.method:*`
 * and `user:*`), else `*`.
 */
export function keyPattern(key: string): string {
  const colon = key.indexOf(':');
  if (colon > 0 && colon <= 100 && NAME.test(key.slice(0, colon))) {
    return `${key.slice(0, colon)}:*`;
  }
  return '*';
}

const NAME = /^[A-Za-z_$][\w$.-]*$/;
