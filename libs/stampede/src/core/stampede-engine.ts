import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { Clock, RandomSource, systemClock, systemRandom } from './clock';
import { defaultCodec, encodedSize, Envelope, EnvelopeCodec } from './envelope';
import { StampedeSerializationError, StampedeTimeoutError } from './errors';
import { keyPattern, StampedeEvents } from './events';
import { invalidateInStore, invalidateTagsInStore } from './invalidate';
import { InvalidationBusWatch } from './invalidation-bus';
import { jitterTtl } from './jitter';
import { L1Cache, L1Limits } from './l1-cache';
import { LastKnownValues } from './last-known';
import type { MethodMetrics } from './metrics';
import { MethodEntry, MetricsRegistry } from './metrics-registry';
import { checkTags, StampedePolicy } from './policy';
import { SingleFlight } from './single-flight';
import type { FillWatch, InvalidationMessage, StampedeStore } from './store';
import { TagVersions } from './tag-versions';
import { FlowTelemetry, noTelemetry, TracedCall } from './telemetry';
import { sleep } from './timers';
import { EarlyRecomputeSchedule } from './xfetch';

export interface EngineLogger {
  warn(message: string): void;
}

export interface EngineDeps {
  store: StampedeStore;
  /** Spans, durations and exported counters; default none. */
  telemetry?: FlowTelemetry;
  /** Where operator events go; default an emitter without listeners. */
  events?: StampedeEvents;
  clock?: Clock;
  random?: RandomSource;
  logger?: EngineLogger;
  /** Limits of the in-process tier; without them there is none. */
  l1?: L1Limits;
  /** Bounds of the values kept for when a distributed store fails (without L1). */
  lastKnown?: { maxEntries?: number; maxBytes?: number };
  codec?: EnvelopeCodec;
}

/** The metrics name of getOrLoad calls without a name: never their key. */
export const UNNAMED_CALL = 'getOrLoad';

/** Computes a value. `signal` aborts when the load passes its hard timeout. */
export type Loader<T> = (signal: AbortSignal) => Promise<T> | T;

const loadSignals = new AsyncLocalStorage<AbortSignal>();

/**
 * The AbortSignal of the load that runs the calling code (for example a decorated method's
 * body, which has no signal parameter), for methods with a hard timeout (the only thing that
 * aborts it); undefined otherwise.
 */
export function currentLoadSignal(): AbortSignal | undefined {
  return loadSignals.getStore();
}

/** One call of the flow: what it loads, how, and the versions of its tags when it started. */
interface Call<T> {
  key: string;
  loader: Loader<T>;
  policy: StampedePolicy;
  m: MethodMetrics;
  /** The method's entry: its counters (`m`), label and telemetry. */
  e: MethodEntry;
  stamp?: Record<string, number>;
}

interface Outcome<T> {
  value: T;
  /** Served from the cache without waiting for a load. */
  hit: boolean;
  /** A stale value (within grace, or held while the store was unreachable). */
  stale?: boolean;
  /** Served by the in-process tier while the store failed (a hit otherwise reads the store). */
  fromL1?: boolean;
  /** This call's flow ran the loader (for its span). */
  loaded?: boolean;
  /** This call's flow waited for a lock (for its span). */
  waited?: boolean;
  /** This call's flow joined a lock path or fallback load already in flight (for its span). */
  joined?: boolean;
}

/** What the lock path did: the value, and whether it waited and loaded (or joined). */
interface LockOutcome<T> {
  value: T;
  waited: boolean;
  loaded: boolean;
  joined?: boolean;
}

/** Values served stale after a failed refresh within grace (see `StampedeEngine#failSafeState`). */
export interface StampedeFailSafeState {
  /** How many keys (at most 10,000 are tracked). */
  keys: number;
  /** Their methods (`Class.method`, or getOrLoad names), sorted; at most 10. */
  methods: string[];
  /** When the oldest of them was first served stale after a failed refresh (epoch ms). */
  since: number;
}

const MAX_FAIL_SAFE_KEYS = 10_000;
const MAX_FAIL_SAFE_METHODS = 10;

/**
 * The get-or-load flow of DESIGN.md sections 3 and 9: the in-process tier, single-flight, read,
 * XFetch early recomputation, grace (stale-while-revalidate and fail-safe), distributed lock with
 * notified waiters, loader timeouts, tags, jittered store, and a fall-back to held values or the
 * loader whenever the store is unavailable.
 */
export class StampedeEngine {
  readonly metrics: MetricsRegistry;
  readonly events: StampedeEvents;
  private readonly telemetry: FlowTelemetry;
  private readonly unobserve: () => void;
  private readonly store: StampedeStore;
  private readonly clock: Clock;
  private readonly random: RandomSource;
  private readonly logger?: EngineLogger;
  private readonly codec: EnvelopeCodec;
  private readonly l1?: L1Cache;
  private readonly tags = new TagVersions();
  /** Tag versions being read from the store: one read per tag at a time. */
  private readonly tagFetches = new SingleFlight<void>();
  private readonly flights = new SingleFlight<Outcome<unknown>>();
  /** Lock attempts, waits and loads shared by concurrent lock-path callers of one key. */
  private readonly lockFlights = new SingleFlight<unknown>();
  /** Store reads shared by concurrent lock-path callers of one key. */
  private readonly reads = new SingleFlight<Envelope<unknown> | undefined>();
  /** Background refreshes loading here: a caller that misses meanwhile joins the load. */
  private readonly refreshLoads = new Map<string, Promise<unknown>>();
  /** Keys with a background refresh running (or owned by another instance) here. */
  private readonly refreshing = new Set<string>();
  /** After a failed refresh, no new attempt on the key before this time. */
  private readonly retryAt = new Map<string, number>();
  private readonly background = new Set<Promise<unknown>>();
  /** Without L1: values seen here, served while a distributed store is unreachable. */
  private readonly lastKnown: LastKnownValues;
  /** Whether the other instances' invalidations reach this one, and what L1 may serve meanwhile. */
  private readonly bus: InvalidationBusWatch;
  /** Loads while the store is unreachable: one per key at a time, whatever the policy. */
  private readonly fallbackLoads = new SingleFlight<unknown>();
  /** When each key is due for early recomputation here (XFetch). */
  private readonly schedule: EarlyRecomputeSchedule;
  private closed = false;
  private lastStoreWarning = 0;
  private lastRefreshWarning = 0;
  private refreshFailuresUnreported = 0;
  /** Since when the store fails (a failure after a success); undefined while it answers. */
  private storeDownSince: number | undefined;
  /**
   * Keys served stale because their refresh within grace failed (fail-safe), oldest failure
   * first: until a value of theirs is loaded or read fresh, they are invalidated, or grace ends.
   */
  private readonly failSafe = new Map<string, { method: string; since: number; until: number }>();

  constructor(deps: EngineDeps) {
    this.store = deps.store;
    this.telemetry = deps.telemetry ?? noTelemetry;
    this.events = deps.events ?? new StampedeEvents();
    this.metrics = new MetricsRegistry(this.telemetry, deps.logger);
    this.unobserve = this.telemetry.observe(this.metrics);
    this.clock = deps.clock ?? systemClock;
    this.random = deps.random ?? systemRandom;
    this.logger = deps.logger;
    this.codec = deps.codec ?? defaultCodec;
    if (deps.l1) this.l1 = new L1Cache(this.codec, deps.l1);
    this.lastKnown = new LastKnownValues(deps.lastKnown?.maxEntries, deps.lastKnown?.maxBytes);
    this.schedule = new EarlyRecomputeSchedule(this.random);
    this.bus = new InvalidationBusWatch(this.events, this.store, deps.l1, this.logger);
    this.store.onInvalidation?.(
      (message) => this.apply(message),
      () => {
        this.l1?.clear();
        this.tags.reset();
      },
      (downSince) => this.bus.changed(downSince, this.clock.now()),
    );
  }

  /**
   * `name` groups the counters (`Class.method`, or a getOrLoad name); without one, `getOrLoad`
   * (never the key: one entry per key would grow without bound).
   */
  async getOrLoad<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    name?: string,
    tags = policy.tags,
  ): Promise<T> {
    const e = this.metrics.entry(name ?? UNNAMED_CALL);
    const m = e.counts;
    m.calls++;
    const held = this.fromL1<T>(key, policy, tags);
    if (held) {
      if (this.failSafe.size > 0) this.failSafe.delete(key);
      m.hits++;
      m.l1Hits++;
      if (this.telemetry.traceL1Hits) e.telemetry.start(key)?.end('l1', false, false, false);
      this.maybeRecomputeEarly(
        { key, loader, policy, m, e, stamp: tags && this.tags.stamp(tags) },
        held,
      );
      return held.v;
    }
    const flow = async (): Promise<Outcome<T>> => {
      if (!policy.cache) {
        const controller = new AbortController();
        const running = this.load(loader, e, controller, policy);
        return {
          value: await this.withHardTimeout(running, { key, policy, m, e }, controller),
          hit: false,
          loaded: true,
        };
      }
      const stamp = tags?.length ? await this.tagStamp(tags, m) : undefined;
      return this.resolve({ key, loader, policy, m, e, stamp });
    };
    // The call that goes to the store (or the loader) is traced; callers that join it in this
    // process are not: they reach neither.
    const run = (): Promise<Outcome<T>> => {
      const span = e.telemetry.start(key);
      return span ? traced(span, flow) : flow();
    };
    let outcome: Outcome<T>;
    if (policy.singleFlight) {
      const flight = this.flights.run(key, run as () => Promise<Outcome<unknown>>);
      if (flight.joined) m.joins++;
      outcome = (await flight.promise) as Outcome<T>;
    } else {
      outcome = await run();
    }
    if (policy.cache) {
      if (outcome.hit) {
        m.hits++;
        if (outcome.fromL1) m.l1Hits++;
        if (outcome.stale || this.refreshing.has(key)) m.staleServes++;
      } else {
        m.misses++;
      }
    }
    return outcome.value;
  }

  /**
   * Removes the cached value here, in the store and in the other instances' L1; rejects with a
   * StampedeInvalidationError when the store does not confirm it (see invalidate.ts).
   */
  async invalidate(key: string): Promise<void> {
    this.forget(key);
    await invalidateInStore(this.store, key);
    this.forget(key); // a call here may have read the old value again before the delete ran
  }

  /**
   * Invalidates every value stamped with one of `tags`, on every instance; rejects with a
   * StampedeInvalidationError naming the tags the store did not confirm (see invalidate.ts).
   */
  async invalidateTags(tags: string[]): Promise<void> {
    checkTags(tags, 'StampedeService.invalidateTags');
    if (tags.length === 0) return;
    await invalidateTagsInStore(this.store, tags, this.tags, this.clock, (message) =>
      this.apply(message),
    );
  }

  /** Entries and size of the in-process tier. */
  l1Stats(): { entries: number; bytes: number } | undefined {
    return this.l1?.stats;
  }

  /** Entries and size of the values kept for when the store fails (without L1). */
  lastKnownStats(): { entries: number; bytes: number } {
    return this.lastKnown.stats;
  }

  /**
   * The values served stale right now because their refresh within grace failed (fail-safe), or
   * undefined when there are none. A key leaves it when a value of it is loaded or read fresh,
   * when it is invalidated, or when its grace ends.
   */
  failSafeState(): StampedeFailSafeState | undefined {
    if (this.failSafe.size === 0) return undefined;
    const now = this.clock.now();
    const methods = new Set<string>();
    let since = Infinity;
    for (const [key, entry] of this.failSafe) {
      if (entry.until <= now) {
        this.failSafe.delete(key);
        continue;
      }
      methods.add(entry.method);
      since = Math.min(since, entry.since);
    }
    if (this.failSafe.size === 0) return undefined;
    return {
      keys: this.failSafe.size,
      methods: [...methods].sort().slice(0, MAX_FAIL_SAFE_METHODS),
      since,
    };
  }

  private noteFailSafe(key: string, method: string, until: number): void {
    const previous = this.failSafe.get(key);
    this.failSafe.delete(key); // kept in order of the last failure
    if (this.failSafe.size >= MAX_FAIL_SAFE_KEYS) {
      const oldest = this.failSafe.keys().next().value;
      if (oldest !== undefined) this.failSafe.delete(oldest);
    }
    this.failSafe.set(key, { method, since: previous?.since ?? this.clock.now(), until });
  }

  /** Waits for background refreshes; later calls skip the cache-warming work. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.background]);
    this.unobserve();
  }

  private apply(message: InvalidationMessage): void {
    for (const key of message.keys ?? []) this.forget(key);
    if (message.tags) {
      for (const [tag, version] of Object.entries(message.tags)) this.tags.learn(tag, version);
      this.l1?.dropTagged(message.tags);
    }
  }

  private forget(key: string): void {
    this.failSafe.delete(key);
    this.flights.forget(key);
    this.lockFlights.forget(key);
    this.reads.forget(key);
    this.lastKnown.forget(key);
    this.l1?.delete(key);
    this.schedule.forget(key);
  }

  /** A fresh value of the in-process tier, when its tags' versions are known here. */
  private fromL1<T>(
    key: string,
    policy: StampedePolicy,
    tags: string[] | undefined,
  ): Envelope<T> | undefined {
    if (!this.l1 || !policy.cache || !policy.l1) return undefined;
    const now = this.clock.now();
    // While invalidations are missed, an entry or a tag version not verified lately is read from
    // the store again.
    const verifiedAfter = this.bus.verifiedAfter(now);
    if (tags?.length && this.tags.missing(tags, verifiedAfter).length > 0) return undefined;
    const envelope = this.l1.get<T>(key, now, verifiedAfter);
    if (!envelope || envelope.e <= now) return undefined;
    if (!this.tags.valid(envelope.t)) {
      this.l1.delete(key);
      return undefined;
    }
    return envelope;
  }

  /**
   * The versions of `tags`; a tag seen for the first time here is read from the store once (and,
   * while the bus is down, again once per `maxStaleMs`).
   */
  private async tagStamp(tags: string[], m: MethodMetrics): Promise<Record<string, number>> {
    const missing = this.tags.missing(tags, this.bus.verifiedAfter(this.clock.now()));
    if (missing.length > 0) {
      const wasDown = this.storeDownSince !== undefined;
      try {
        await Promise.all(
          missing.map((tag) => this.tagFetches.run(tag, () => this.fetchTag(tag)).promise),
        );
        if (wasDown) this.storeAnswered();
      } catch (err) {
        this.noteStoreError(err, m, 'using the tag versions known here');
      }
    }
    return this.tags.stamp(tags);
  }

  private async fetchTag(tag: string): Promise<void> {
    const fetchedAt = this.clock.now();
    const [version] = this.store.tagVersions
      ? await this.store.tagVersions([tag], [this.tags.next(tag)])
      : [this.tags.next(tag, fetchedAt)];
    this.tags.learn(tag, version, fetchedAt);
  }

  /**
   * Keeps a value stored or read just now: in L1, or (for a distributed store) among the last
   * known values. `raw` is its encoded text, when at hand.
   */
  private hold(call: Call<unknown>, envelope: Envelope<unknown>, raw?: string): void {
    if (this.l1 && call.policy.l1) {
      this.l1.set(call.key, envelope, envelope.e + call.policy.grace, this.clock.now(), raw);
    } else if (this.store.distributed) {
      const size = raw?.length ?? encodedSize(envelope) ?? this.codec.encode(envelope).length;
      this.lastKnown.remember(call.key, envelope, size);
    }
  }

  /** The text of a loaded value's envelope; one the serializer cannot write fails the call. */
  private encode(call: Call<unknown>, envelope: Envelope): string {
    try {
      return this.codec.encode(envelope);
    } catch (err) {
      throw new StampedeSerializationError(call.e.label, call.key, err);
    }
  }

  /** A value held here that may be served at `now` (stale ones only within grace). */
  private heldValue<T>(call: Call<T>, now: number): Envelope<T> | undefined {
    const envelope =
      this.l1 && call.policy.l1
        ? this.l1.get<T>(call.key, now)
        : this.lastKnown.fresh<T>(call.key, now, call.policy.grace);
    return envelope && this.tags.valid(envelope.t) ? envelope : undefined;
  }

  /** A value invalidated through one of its tags is a miss: drop it. */
  private async usable<T>(
    call: Call<T>,
    envelope: Envelope<T> | undefined,
  ): Promise<Envelope<T> | undefined> {
    if (!envelope || this.tags.valid(envelope.t)) return envelope;
    this.l1?.delete(call.key);
    await this.store.delete(call.key).catch(() => undefined);
    return undefined;
  }

  private async resolve<T>(call: Call<T>): Promise<Outcome<T>> {
    const { key, policy } = call;
    let envelope: Envelope<T> | undefined;
    const wasDown = this.storeDownSince !== undefined;
    try {
      envelope = policy.lock ? await this.sharedRead<T>(key) : await this.store.get<T>(key);
    } catch (err) {
      return this.withoutStore(call, err);
    }
    if (wasDown) this.storeAnswered();
    envelope = await this.usable(call, envelope);
    if (envelope) {
      this.hold(call, envelope);
      const now = this.clock.now();
      if (envelope.e > now) {
        if (this.failSafe.size > 0) this.failSafe.delete(key); // refreshed, here or elsewhere
        this.maybeRecomputeEarly(call, envelope);
        return { value: envelope.v, hit: true };
      }
      if (now < envelope.e + policy.grace) return this.serveStale(call, envelope);
      // Past grace on this clock (the store's clock ran later): a miss.
    }
    const refresh = this.refreshLoads.get(key) as Promise<T> | undefined;
    if (refresh) {
      try {
        return { value: await refresh, hit: false };
      } catch {
        // the refresh failed: load as on any miss
      }
    }
    if (policy.lock) {
      const { value, waited, loaded, joined } = await this.loadUnderLock(call);
      return { value, hit: false, waited, loaded, joined };
    }
    return { value: await this.loadAndStore(call), hit: false, loaded: true };
  }

  /**
   * Within grace: one refresh runs in the background while callers get the stale value, at once
   * or, with a soft timeout, once the refresh has had that long to answer.
   */
  private async serveStale<T>(call: Call<T>, stale: Envelope<T>): Promise<Outcome<T>> {
    const refresh = this.refreshInBackground(call, stale, false);
    const soft = call.policy.timeout?.soft;
    if (refresh && soft) {
      const nap = sleep(soft);
      const fresh = await Promise.race([refresh, nap.done.then(() => undefined)]);
      nap.cancel();
      if (fresh) return { value: fresh.value, hit: false };
    }
    return { value: stale.v, hit: true, stale: true };
  }

  /**
   * The lock path is shared by the callers of one key in this process: the first takes the lock
   * or waits for its holder, the others join it (as they would wait for a holder elsewhere), so
   * a crowd of callers costs one lock attempt and one wait, not one each.
   */
  private loadUnderLock<T>(call: Call<T>): Promise<LockOutcome<T>> {
    const run = this.lockFlights.run(call.key, () => this.lockAndLoad(call));
    const promise = run.promise as Promise<LockOutcome<T>>;
    if (!run.joined) return promise;
    call.m.joins++;
    return promise.then((o) => ({ value: o.value, waited: o.waited, loaded: false, joined: true }));
  }

  private async lockAndLoad<T>(call: Call<T>): Promise<LockOutcome<T>> {
    const { key, m, e } = call;
    const lock = call.policy.lock!;
    const token = randomUUID();
    const deadline = this.clock.now() + lock.wait;
    let waitStart: number | undefined;
    let waited = false;
    /** Ends a wait; returns how long it lasted. */
    const endWait = () => {
      if (waitStart === undefined) return 0;
      const ms = this.clock.now() - waitStart;
      m.lockWaitMs += ms;
      e.telemetry.lockWaited(ms);
      waitStart = undefined;
      return ms;
    };
    const served = (value: T, loaded = false): LockOutcome<T> => ({ value, waited, loaded });
    // A first attempt costs no subscription; a caller that must wait watches the key, then
    // tries again as a registered waiter, so the holder's fill notifies it.
    let watch: FillWatch | undefined;
    let live = false;
    const stopWatching = () => {
      watch?.cancel();
      watch = undefined;
    };
    try {
      for (;;) {
        let step;
        const wasDown = this.storeDownSince !== undefined;
        try {
          step = await this.store.readOrLock<T>(key, token, lock.ttl, watch !== undefined);
        } catch (err) {
          endWait();
          const fallback = await this.withoutStore(call, err);
          return served(fallback.value, fallback.loaded);
        }
        if (wasDown) this.storeAnswered();
        if (step.kind === 'hit') {
          if (!(await this.usable(call, step.envelope))) continue;
          endWait();
          this.hold(call, step.envelope);
          return served(step.envelope.v);
        }
        if (step.kind === 'locked') {
          endWait();
          stopWatching();
          return served(await this.loadAndStore(call, token), true);
        }
        const now = this.clock.now();
        if (waitStart === undefined) {
          waitStart = now;
          waited = true;
          m.lockWaits++;
        }
        const remaining = deadline - now;
        if (remaining <= 0) {
          const waitedMs = endWait();
          stopWatching();
          m.lockTimeouts++;
          this.logger?.warn(`waited ${lock.wait} ms for the lock of "${key}"; loading without it`);
          this.events.emit('stampede.lock.timeout', {
            method: e.label,
            keyPattern: keyPattern(key),
            waitedMs,
          });
          return served(await this.loadAndStore(call), true);
        }
        if (!watch) {
          watch = this.store.watch(key);
          live = await watch.ready;
          continue;
        }
        // Notified waiters sleep until the holder's lock would expire; polling is the fallback.
        const lockLeft = step.lockTtlMs >= 0 ? step.lockTtlMs + lock.poll : lock.ttl;
        const notifiable = live && this.store.notificationsLive();
        const nap = sleep(Math.min(notifiable ? lockLeft : lock.poll, remaining));
        const notified = await Promise.race([
          watch.done.then(() => true),
          nap.done.then(() => false),
        ]);
        nap.cancel();
        // Re-arm before reading, so that a release seen as a miss below is not missed after it.
        watch.cancel();
        watch = this.store.watch(key);
        live = await watch.ready;
        if (!notified) continue;
        // Woken by a fill: the waiters of this process share one read of the new value.
        try {
          const envelope = await this.usable(call, await this.sharedRead<T>(key));
          if (envelope) {
            endWait();
            this.hold(call, envelope);
            return served(envelope.v);
          }
        } catch (err) {
          endWait();
          const fallback = await this.withoutStore(call, err);
          return served(fallback.value, fallback.loaded);
        }
      }
    } finally {
      stopWatching();
    }
  }

  private sharedRead<T>(key: string): Promise<Envelope<T> | undefined> {
    return this.reads.run(key, () => this.store.get(key)).promise as Promise<
      Envelope<T> | undefined
    >;
  }

  /**
   * Runs the loader and stores its value (kept `ttl + grace`); with `token`, the store also
   * releases that lock. Past the hard timeout the caller gets a StampedeTimeoutError, while the
   * load may still finish and fill the cache.
   */
  private loadAndStore<T>(call: Call<T>, token?: string): Promise<T> {
    const { key, policy, e } = call;
    const extender =
      token && policy.lock?.autoExtend ? this.autoExtend(key, token, policy.lock.ttl) : undefined;
    const started = this.clock.now();
    const controller = new AbortController();
    const loaded = this.load(call.loader, e, controller, policy);
    // The value is stored even when the callers gave up on it (hard timeout).
    const stored = loaded
      .then(
        async (value) => {
          if (this.failSafe.size > 0) this.failSafe.delete(key);
          await this.storeValue(call, value, started, token);
          return value;
        },
        async (err: unknown) => {
          if (token) await this.store.unlock(key, token).catch(() => undefined);
          throw err;
        },
      )
      .finally(() => {
        if (extender) clearInterval(extender);
      });
    stored.catch(() => undefined); // observed below, unless the hard timeout came first
    return this.withHardTimeout(loaded, call, controller).then(() => stored);
  }

  private async storeValue<T>(
    call: Call<T>,
    value: T,
    started: number,
    token?: string,
  ): Promise<void> {
    const { key, policy, m } = call;
    const storable = value !== undefined && (value !== null || policy.cacheNull);
    const wasDown = this.storeDownSince !== undefined;
    const ttl = policy.jitter
      ? jitterTtl(policy.ttl, policy.jitter.ratio, this.random)
      : policy.ttl;
    const now = this.clock.now();
    const envelope: Envelope = { v: value, d: now - started, e: now + ttl };
    if (call.stamp) envelope.t = call.stamp;
    let raw: string | undefined;
    try {
      if (storable) raw = this.encode(call, envelope);
    } catch (err) {
      // Nothing will be stored: the next caller must not wait for this lock.
      if (token) await this.store.unlock(key, token).catch(() => undefined);
      throw err;
    }
    try {
      if (raw !== undefined) {
        this.hold(call, envelope, raw);
        this.schedule.stored(key, envelope.e);
        // The text encoded above is stored as it is when the store encodes with the same codec.
        const text = this.store.codec === this.codec ? raw : undefined;
        await this.store.fill(key, envelope, ttl + policy.grace, token, text);
      } else if (token) {
        await this.store.unlock(key, token);
      }
      if (wasDown && (storable || token)) this.storeAnswered();
    } catch (err) {
      // The value is still returned; the lock, if any, expires on its own.
      this.noteStoreError(err, m, `the value ${call.e.label} loaded was returned but not cached`);
    }
  }

  /** Runs a loader with its AbortSignal (also reachable through currentLoadSignal()), counted and timed. */
  private async load<T>(
    loader: Loader<T>,
    e: MethodEntry,
    controller: AbortController,
    policy: StampedePolicy,
  ): Promise<T> {
    e.counts.loads++;
    const started = this.clock.now();
    try {
      // Only a hard timeout aborts the signal. Without one, the loader runs outside the
      // AsyncLocalStorage: on Node 20 its first use turns on promise hooks for the whole process.
      const value = await (policy.timeout?.hard
        ? loadSignals.run(controller.signal, () => loader(controller.signal))
        : loader(controller.signal));
      e.telemetry.loaded(this.clock.now() - started);
      return value;
    } catch (err) {
      e.counts.errors++;
      e.telemetry.loaded(this.clock.now() - started);
      throw err;
    }
  }

  private withHardTimeout<T>(
    running: Promise<T>,
    call: Pick<Call<T>, 'key' | 'policy' | 'm' | 'e'>,
    controller: AbortController,
  ): Promise<T> {
    const hard = call.policy.timeout?.hard;
    if (!hard) return running;
    running.catch(() => undefined); // settles after the callers gave up: not unhandled
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        call.m.timeouts++;
        this.events.emit('stampede.load.timeout', {
          method: call.e.label,
          keyPattern: keyPattern(call.key),
          timeoutMs: hard,
        });
        const error = new StampedeTimeoutError(
          `loading "${call.key}" took longer than ${hard} ms (timeout.hard); it may still finish and fill the cache`,
        );
        controller.abort(error);
        reject(error);
      }, hard);
      timer.unref();
      running.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  /**
   * The store did not answer. A value this process holds, within its TTL (or grace), is what the
   * store would have answered: serve it. Otherwise load, one load per key at a time here, and
   * keep the value, so that a stalled Redis does not turn into a backend stampede.
   */
  private async withoutStore<T>(call: Call<T>, err: unknown): Promise<Outcome<T>> {
    const { key, policy, m, e } = call;
    const now = this.clock.now();
    const held = this.heldValue(call, now);
    if (held) {
      const stale = held.e <= now;
      this.noteStoreError(
        err,
        m,
        `${e.label} answered with a value held here${stale ? ' (stale, within grace)' : ''}, no load`,
      );
      const fromL1 = this.l1 !== undefined && policy.l1;
      return { value: held.v, hit: true, stale, fromL1 };
    }
    this.noteStoreError(err, m, `${e.label} answered by its loader, one load per key at a time`);
    const { promise, joined } = this.fallbackLoads.run(key, async () => {
      const started = this.clock.now();
      const controller = new AbortController();
      const value = await this.withHardTimeout(
        this.load(call.loader, e, controller, policy),
        call,
        controller,
      );
      if (this.failSafe.size > 0) this.failSafe.delete(key);
      if (value !== undefined && (value !== null || policy.cacheNull)) {
        const at = this.clock.now();
        const envelope: Envelope = { v: value, d: at - started, e: at + policy.ttl };
        if (call.stamp) envelope.t = call.stamp;
        const raw = this.encode(call, envelope);
        if (this.l1 && policy.l1) this.l1.set(key, envelope, envelope.e + policy.grace, at, raw);
        else this.lastKnown.remember(key, envelope, raw.length);
      }
      return value;
    });
    if (joined) m.joins++;
    return { value: (await promise) as T, hit: false, loaded: !joined, joined };
  }

  /** `outcome` says what the call did without the store, for the warning. */
  private noteStoreError(err: unknown, m: MethodMetrics, outcome: string): void {
    m.storeErrors++;
    const now = this.clock.now();
    const message = err instanceof Error ? err.message : String(err);
    if (now - this.lastStoreWarning >= 10_000) {
      this.lastStoreWarning = now;
      this.logger?.warn(`${this.store.name} store unavailable (${message}); ${outcome}`);
    }
    if (this.storeDownSince === undefined) {
      // Edge-triggered: one event per transition, however many calls fail meanwhile.
      this.storeDownSince = now;
      this.events.emit('stampede.store.unavailable', { store: this.store.name, error: message });
    }
  }

  /**
   * A store operation that started while the store was failing has succeeded: it is back. (One
   * that started before the failure proves nothing, hence the callers' `wasDown`.)
   */
  private storeAnswered(): void {
    const since = this.storeDownSince;
    if (since === undefined) return;
    this.storeDownSince = undefined;
    this.events.emit('stampede.store.recovered', {
      store: this.store.name,
      downMs: Math.max(0, this.clock.now() - since),
    });
  }

  /** At most one warning per 10 s, like the store's; it says how many failures it stands for. */
  private noteRefreshFailure(key: string, err: unknown, early: boolean): void {
    this.refreshFailuresUnreported++;
    const now = this.clock.now();
    if (now - this.lastRefreshWarning < 10_000) return;
    this.lastRefreshWarning = now;
    const message = err instanceof Error ? err.message : String(err);
    const others = this.refreshFailuresUnreported - 1;
    this.refreshFailuresUnreported = 0;
    this.logger?.warn(
      `${early ? 'early recomputation' : 'refresh within grace'} of "${key}" failed: ${message}; ` +
        `the current value is kept` +
        (others > 0 ? ` (and ${others} more failed recomputation(s) since the last warning)` : ''),
    );
  }

  private maybeRecomputeEarly<T>(call: Call<T>, envelope: Envelope<T>): void {
    const { key, policy } = call;
    if (!policy.xfetch || this.closed || this.refreshing.has(key)) return;
    // Never before half the TTL: a load time inflated by a stalled event loop would otherwise
    // make a value due as soon as it is stored, and the key would be refreshed twice per TTL.
    const due = this.schedule.due(key, envelope, policy.xfetch.beta, policy.ttl / 2);
    if (this.clock.now() < due) return;
    this.refreshInBackground(call, envelope, true);
  }

  /**
   * Refreshes `current` in the background: one per key here, one across instances with a lock
   * (a try-lock that declines if the value changed since it was read). After a failure, the key
   * is left alone for `graceBackoff`. Resolves with the new value, or undefined when this
   * instance does not refresh.
   */
  private refreshInBackground<T>(
    call: Call<T>,
    current: Envelope<T>,
    early: boolean,
  ): Promise<{ value: T } | undefined> | undefined {
    const { key, policy, m } = call;
    if (this.closed) return undefined;
    const now = this.clock.now();
    if (this.refreshing.has(key)) {
      const running = this.refreshLoads.get(key) as Promise<T> | undefined;
      return running?.then(
        (value) => ({ value }),
        () => undefined,
      );
    }
    if ((this.retryAt.get(key) ?? 0) > now) return undefined;
    this.refreshing.add(key);
    const task = (async (): Promise<{ value: T } | undefined> => {
      let token: string | undefined;
      let release = true;
      let span: TracedCall | undefined;
      try {
        if (policy.lock) {
          token = randomUUID();
          if (!(await this.store.tryLock(key, token, policy.lock.ttl, current))) {
            // Another instance refreshes: stay quiet here until the current value expires
            // (within grace: for one backoff, in case that refresh fails).
            release = false;
            const quietMs = early ? Math.max(0, current.e - now) : policy.graceBackoff;
            const quiet = sleep(Math.min(quietMs, policy.lock.ttl));
            void quiet.done.then(() => this.refreshing.delete(key));
            return undefined;
          }
        }
        if (early) m.earlyRecomputes++;
        span = call.e.telemetry.start(key, true);
        const load = span
          ? span.run(() => this.loadAndStore(call, token))
          : this.loadAndStore(call, token);
        this.refreshLoads.set(key, load);
        try {
          const value = await load;
          this.retryAt.delete(key);
          span?.end('none', false, true, false);
          return { value };
        } finally {
          this.refreshLoads.delete(key);
        }
      } catch (err) {
        span?.end('none', false, true, false, err);
        if (!early) {
          m.failSafes++;
          this.noteFailSafe(key, call.e.label, current.e + policy.grace);
          this.events.emit('stampede.failsafe', {
            method: call.e.label,
            keyPattern: keyPattern(key),
            error: err instanceof Error ? err.message : String(err),
          });
        }
        if (this.retryAt.size >= 10_000) this.retryAt.clear();
        this.retryAt.set(key, this.clock.now() + policy.graceBackoff);
        this.noteRefreshFailure(key, err, early);
        return undefined;
      } finally {
        if (release) this.refreshing.delete(key);
      }
    })();
    this.background.add(task);
    void task.finally(() => this.background.delete(task));
    return task;
  }

  private autoExtend(key: string, token: string, ttl: number): NodeJS.Timeout {
    const timer = setInterval(
      () => {
        this.store.extendLock(key, token, ttl).catch(() => undefined);
      },
      Math.max(1, Math.floor(ttl / 3)),
    );
    timer.unref();
    return timer;
  }
}

/** Runs one call's flow inside its span, and ends the span with what the flow did. */
async function traced<T>(span: TracedCall, flow: () => Promise<Outcome<T>>): Promise<Outcome<T>> {
  let outcome: Outcome<T>;
  try {
    outcome = await span.run(flow);
  } catch (err) {
    span.end('none', false, false, false, err);
    throw err;
  }
  span.end(
    outcome.fromL1 ? 'l1' : outcome.hit ? 'store' : 'none',
    outcome.waited === true,
    outcome.loaded === true,
    outcome.joined === true,
  );
  return outcome;
}
