import { randomUUID } from 'node:crypto';
import { Clock, RandomSource, systemClock, systemRandom } from './clock';
import type { Envelope } from './envelope';
import { jitterTtl } from './jitter';
import { MethodMetrics, MetricsRegistry } from './metrics';
import type { StampedePolicy } from './policy';
import { LastKnownValues } from './last-known';
import { SingleFlight } from './single-flight';
import type { FillWatch, StampedeStore } from './store';
import { sleep } from './timers';
import { EarlyRecomputeSchedule } from './xfetch';

export interface EngineLogger {
  warn(message: string): void;
}

export interface EngineDeps {
  store: StampedeStore;
  metrics?: MetricsRegistry;
  clock?: Clock;
  random?: RandomSource;
  logger?: EngineLogger;
}

export type Loader<T> = () => Promise<T> | T;

interface Outcome<T> {
  value: T;
  /** Served from the cache without waiting for a load. */
  hit: boolean;
}

/**
 * The get-or-load flow of DESIGN.md section 3: single-flight, read, XFetch early
 * recomputation, distributed lock with notified waiters, jittered store, and a fall-back to
 * the loader whenever the store is unavailable.
 */
export class StampedeEngine {
  readonly metrics: MetricsRegistry;
  private readonly store: StampedeStore;
  private readonly clock: Clock;
  private readonly random: RandomSource;
  private readonly logger?: EngineLogger;
  private readonly flights = new SingleFlight<Outcome<unknown>>();
  /** Store reads shared by concurrent lock-path callers of one key. */
  private readonly reads = new SingleFlight<Envelope<unknown> | undefined>();
  /** Early recomputations loading here: a caller that misses meanwhile joins the load. */
  private readonly refreshLoads = new Map<string, Promise<unknown>>();
  /** Keys with an early recomputation running (or owned by another instance) here. */
  private readonly refreshing = new Set<string>();
  private readonly background = new Set<Promise<void>>();
  /** Values seen here, served while a distributed store is unreachable (see withoutStore). */
  private readonly lastKnown = new LastKnownValues();
  /** Loads while the store is unreachable: one per key at a time, whatever the policy. */
  private readonly fallbackLoads = new SingleFlight<unknown>();
  /** When each key is due for early recomputation here (XFetch). */
  private readonly schedule: EarlyRecomputeSchedule;
  private closed = false;
  private lastStoreWarning = 0;
  private lastRefreshWarning = 0;
  private refreshFailuresUnreported = 0;

  constructor(deps: EngineDeps) {
    this.store = deps.store;
    this.metrics = deps.metrics ?? new MetricsRegistry();
    this.clock = deps.clock ?? systemClock;
    this.random = deps.random ?? systemRandom;
    this.logger = deps.logger;
    this.schedule = new EarlyRecomputeSchedule(this.random);
  }

  async getOrLoad<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    name = key,
  ): Promise<T> {
    const m = this.metrics.for(name);
    m.calls++;
    const run = () =>
      policy.cache
        ? this.resolve(key, loader, policy, m)
        : this.runLoader(loader, m).then((value) => ({ value, hit: false }));
    let outcome: Outcome<T>;
    if (policy.singleFlight) {
      const { promise, joined } = this.flights.run(key, run as () => Promise<Outcome<unknown>>);
      if (joined) m.joins++;
      outcome = (await promise) as Outcome<T>;
    } else {
      outcome = await run();
    }
    if (policy.cache) {
      if (outcome.hit) {
        m.hits++;
        if (this.refreshing.has(key)) m.staleServes++;
      } else {
        m.misses++;
      }
    }
    return outcome.value;
  }

  /** Removes the cached value; calls in flight are not joined by later callers. */
  async invalidate(key: string): Promise<void> {
    this.flights.forget(key);
    this.reads.forget(key);
    this.lastKnown.forget(key);
    this.schedule.forget(key);
    await this.store.delete(key);
  }

  /** Waits for background recomputations; later calls skip the cache-warming work. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.background]);
  }

  private async resolve<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    m: MethodMetrics,
  ): Promise<Outcome<T>> {
    let envelope: Envelope<T> | undefined;
    try {
      envelope = policy.lock ? await this.sharedRead<T>(key) : await this.store.get<T>(key);
    } catch (err) {
      return this.withoutStore(key, err, loader, policy, m);
    }
    if (envelope) {
      if (this.store.distributed) this.lastKnown.remember(key, envelope);
      this.maybeRecomputeEarly(key, envelope, loader, policy, m);
      return { value: envelope.v, hit: true };
    }
    const refresh = this.refreshLoads.get(key) as Promise<T> | undefined;
    if (refresh) {
      try {
        return { value: await refresh, hit: false };
      } catch {
        // the early recomputation failed: load as on any miss
      }
    }
    if (policy.lock) {
      return { value: await this.loadUnderLock(key, loader, policy, m), hit: false };
    }
    return { value: await this.loadAndStore(key, loader, policy, m), hit: false };
  }

  private async loadUnderLock<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    m: MethodMetrics,
  ): Promise<T> {
    const lock = policy.lock!;
    const token = randomUUID();
    const deadline = this.clock.now() + lock.wait;
    let waitStart: number | undefined;
    const endWait = () => {
      if (waitStart !== undefined) m.lockWaitMs += this.clock.now() - waitStart;
      waitStart = undefined;
    };
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
        try {
          step = await this.store.readOrLock<T>(key, token, lock.ttl, watch !== undefined);
        } catch (err) {
          endWait();
          return (await this.withoutStore(key, err, loader, policy, m)).value;
        }
        if (step.kind === 'hit') {
          endWait();
          return step.envelope.v;
        }
        if (step.kind === 'locked') {
          endWait();
          stopWatching();
          return this.loadAndStore(key, loader, policy, m, token);
        }
        const now = this.clock.now();
        if (waitStart === undefined) {
          waitStart = now;
          m.lockWaits++;
        }
        const remaining = deadline - now;
        if (remaining <= 0) {
          endWait();
          stopWatching();
          m.lockTimeouts++;
          this.logger?.warn(`waited ${lock.wait} ms for the lock of "${key}"; loading without it`);
          return this.loadAndStore(key, loader, policy, m);
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
          const envelope = await this.sharedRead<T>(key);
          if (envelope) {
            endWait();
            return envelope.v;
          }
        } catch (err) {
          endWait();
          return (await this.withoutStore(key, err, loader, policy, m)).value;
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

  /** Runs the loader and stores its value; with `token`, the store also releases that lock. */
  private async loadAndStore<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    m: MethodMetrics,
    token?: string,
  ): Promise<T> {
    const extender =
      token && policy.lock?.autoExtend ? this.autoExtend(key, token, policy.lock.ttl) : undefined;
    const started = this.clock.now();
    let value: T;
    try {
      value = await this.runLoader(loader, m);
    } catch (err) {
      if (token) await this.store.unlock(key, token).catch(() => undefined);
      throw err;
    } finally {
      if (extender) clearInterval(extender);
    }
    const storable = value !== undefined && (value !== null || policy.cacheNull);
    try {
      if (storable) {
        const ttl = policy.jitter
          ? jitterTtl(policy.ttl, policy.jitter.ratio, this.random)
          : policy.ttl;
        const now = this.clock.now();
        const envelope = { v: value, d: now - started, e: now + ttl };
        if (this.store.distributed) this.lastKnown.remember(key, envelope);
        this.schedule.stored(key, envelope.e);
        await this.store.fill(key, envelope, ttl, token);
      } else if (token) {
        await this.store.unlock(key, token);
      }
    } catch (err) {
      // The value is still returned; the lock, if any, expires on its own.
      this.noteStoreError(err, m);
    }
    return value;
  }

  private async runLoader<T>(loader: Loader<T>, m: MethodMetrics): Promise<T> {
    m.loads++;
    try {
      return await loader();
    } catch (err) {
      m.errors++;
      throw err;
    }
  }

  /**
   * The store did not answer. A value this process has seen, and that has not expired, is what
   * the store would have answered: serve it. Otherwise load, one load per key at a time here, and
   * keep the value until its TTL, so that a stalled Redis does not turn into a backend stampede.
   */
  private async withoutStore<T>(
    key: string,
    err: unknown,
    loader: Loader<T>,
    policy: StampedePolicy,
    m: MethodMetrics,
  ): Promise<Outcome<T>> {
    this.noteStoreError(err, m);
    const known = this.lastKnown.fresh<T>(key, this.clock.now());
    if (known) return { value: known.v, hit: true };
    const { promise, joined } = this.fallbackLoads.run(key, async () => {
      const started = this.clock.now();
      const value = await this.runLoader(loader, m);
      if (value !== undefined && (value !== null || policy.cacheNull)) {
        const now = this.clock.now();
        this.lastKnown.remember(key, { v: value, d: now - started, e: now + policy.ttl });
      }
      return value;
    });
    if (joined) m.joins++;
    return { value: (await promise) as T, hit: false };
  }

  private noteStoreError(err: unknown, m: MethodMetrics): void {
    m.storeErrors++;
    const now = this.clock.now();
    if (now - this.lastStoreWarning >= 10_000) {
      this.lastStoreWarning = now;
      const message = err instanceof Error ? err.message : String(err);
      this.logger?.warn(
        `${this.store.name} store unavailable (${message}); answering from the loader`,
      );
    }
  }

  /** At most one warning per 10 s, like the store's; it says how many failures it stands for. */
  private noteRefreshFailure(key: string, err: unknown): void {
    this.refreshFailuresUnreported++;
    const now = this.clock.now();
    if (now - this.lastRefreshWarning < 10_000) return;
    this.lastRefreshWarning = now;
    const message = err instanceof Error ? err.message : String(err);
    const others = this.refreshFailuresUnreported - 1;
    this.refreshFailuresUnreported = 0;
    this.logger?.warn(
      `early recomputation of "${key}" failed: ${message}; the current value is kept` +
        (others > 0 ? ` (and ${others} more failed recomputation(s) since the last warning)` : ''),
    );
  }

  private maybeRecomputeEarly<T>(
    key: string,
    envelope: Envelope<T>,
    loader: Loader<T>,
    policy: StampedePolicy,
    m: MethodMetrics,
  ): void {
    if (!policy.xfetch || this.closed || this.refreshing.has(key)) return;
    const now = this.clock.now();
    if (now < this.schedule.due(key, envelope, policy.xfetch.beta)) return;
    this.refreshing.add(key);
    const task = (async () => {
      let token: string | undefined;
      let release = true;
      try {
        if (policy.lock) {
          token = randomUUID();
          if (!(await this.store.tryLock(key, token, policy.lock.ttl, envelope))) {
            // Another instance recomputes: stay quiet here until the current value expires.
            release = false;
            const quiet = sleep(Math.min(Math.max(0, envelope.e - now), policy.lock.ttl));
            void quiet.done.then(() => this.refreshing.delete(key));
            return;
          }
        }
        m.earlyRecomputes++;
        const load = this.loadAndStore(key, loader, policy, m, token);
        this.refreshLoads.set(key, load);
        try {
          await load;
        } finally {
          this.refreshLoads.delete(key);
        }
      } catch (err) {
        this.noteRefreshFailure(key, err);
      } finally {
        if (release) this.refreshing.delete(key);
      }
    })();
    this.background.add(task);
    void task.finally(() => this.background.delete(task));
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
