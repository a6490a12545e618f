import type { EngineLogger, Loader } from './call';
import { Clock, RandomSource, systemClock, systemRandom } from './clock';
import { defaultCodec, Envelope, EnvelopeCodec } from './envelope';
import { EntryAccess, EntryOptions } from './entry-access';
import { StampedeEvents } from './events';
import { Fallback } from './fallback';
import type { FlowStages } from './flow-stages';
import { GetOrLoad } from './get-or-load';
import { GetOrLoadMany } from './get-or-load-many';
import { HeldValues } from './held-values';
import { expireInStore, invalidateInStore, invalidateTagsInStore } from './invalidate';
import { InvalidationBusWatch } from './invalidation-bus';
import { KeyStates, StampedeFailSafeState } from './key-state';
import type { L1Limits } from './l1-cache';
import { LoadAndFill } from './load-and-fill';
import { LoaderRun } from './loader-run';
import { LockPath } from './lock-path';
import { MetricsRegistry } from './metrics-registry';
import type { BatchLoader } from './missing-batch';
import { checkTags, StampedePolicy } from './policy';
import { Refresher } from './refresher';
import type { InvalidationMessage, InvalidationMode, StampedeStore } from './store';
import { StoreGuard } from './store-guard';
import { TagStamps } from './tag-stamps';
import { ALL_KEYS_TAG, TagVersions } from './tag-versions';
import { FlowTelemetry, noTelemetry } from './telemetry';
import { EarlyRecomputeSchedule } from './xfetch';

export type { EngineLogger, Loader } from './call';
export type { StampedeFailSafeState } from './key-state';
export type { BatchLoader, BatchResult } from './missing-batch';
export { currentLoadSignal } from './loader-run';
export type { EntryOptions } from './entry-access';

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

export { UNNAMED_CALL } from './get-or-load';

/**
 * The cache of one store: builds the stages (see flow-stages.ts) once, and answers through the
 * get-or-load flows of one key (get-or-load.ts) and of many (get-or-load-many.ts), the entries
 * without a loader (entry-access.ts) and invalidations (invalidate.ts).
 */
export class StampedeEngine {
  readonly metrics: MetricsRegistry;
  readonly events: StampedeEvents;
  private readonly telemetry: FlowTelemetry;
  private readonly unobserve: () => void;
  private readonly store: StampedeStore;
  private readonly clock: Clock;
  private readonly keys = new KeyStates();
  private readonly tags = new TagVersions();
  private readonly bus: InvalidationBusWatch;
  private readonly guard: StoreGuard;
  private readonly held: HeldValues;
  private readonly tagStamps: TagStamps;
  private readonly schedule: EarlyRecomputeSchedule;
  private readonly fill: LoadAndFill;
  private readonly fallback: Fallback;
  private readonly lockPath: LockPath;
  private readonly refresher: Refresher;
  private readonly loader: LoaderRun;
  private readonly one: GetOrLoad;
  private readonly many: GetOrLoadMany;
  private readonly entries: EntryAccess;

  constructor(deps: EngineDeps) {
    const store = (this.store = deps.store);
    const clock = (this.clock = deps.clock ?? systemClock);
    const codec = deps.codec ?? defaultCodec;
    const logger = deps.logger;
    const random = deps.random ?? systemRandom;
    const events = (this.events = deps.events ?? new StampedeEvents());
    this.telemetry = deps.telemetry ?? noTelemetry;
    this.metrics = new MetricsRegistry(this.telemetry, logger);
    this.unobserve = this.telemetry.observe(this.metrics);
    this.bus = new InvalidationBusWatch(events, store, deps.l1, logger);
    this.guard = new StoreGuard(store.name, clock, events, logger);
    this.held = new HeldValues(store, codec, clock, this.tags, this.bus, deps.l1, deps.lastKnown);
    this.tagStamps = new TagStamps(store, this.tags, this.bus, this.guard, clock);
    this.schedule = new EarlyRecomputeSchedule(random);
    this.loader = new LoaderRun(clock, events);
    this.fill = new LoadAndFill(
      store,
      this.loader,
      this.held,
      this.schedule,
      this.guard,
      this.keys,
      codec,
      clock,
      random,
      this.tagStamps,
    );
    this.entries = new EntryAccess(
      store,
      this.held,
      this.tagStamps,
      this.guard,
      codec,
      clock,
      random,
    );
    this.fallback = new Fallback(this.held, this.guard, this.loader, this.keys, codec, clock);
    this.lockPath = new LockPath(
      store,
      this.keys,
      this.guard,
      this.held,
      this.fill,
      this.fallback,
      clock,
      events,
      logger,
    );
    this.refresher = new Refresher(
      store,
      this.keys,
      this.fill,
      this.schedule,
      clock,
      events,
      logger,
    );
    const stages: FlowStages = {
      store,
      keys: this.keys,
      tags: this.tags,
      tagStamps: this.tagStamps,
      guard: this.guard,
      held: this.held,
      fill: this.fill,
      fallback: this.fallback,
      lockPath: this.lockPath,
      refresher: this.refresher,
      loader: this.loader,
      metrics: this.metrics,
      telemetry: this.telemetry,
      clock,
    };
    this.one = new GetOrLoad(stages);
    this.many = new GetOrLoadMany(stages);
    store.onInvalidation?.(
      (message) => this.apply(message),
      () => {
        this.held.l1?.clear();
        this.tags.reset();
      },
      (downSince) => this.bus.changed(downSince, clock.now()),
    );
  }

  /**
   * `name` groups the counters (`Class.method`, or a getOrLoad name); without one, `getOrLoad`
   * (never the key: one entry per key would grow without bound). A fresh value of the in-process
   * tier is answered in the caller's turn, with an already resolved promise (see get-or-load.ts).
   */
  getOrLoad<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    name?: string,
    tags = policy.tags,
  ): Promise<T> {
    return this.one.run(key, loader, policy, name, tags);
  }

  /**
   * The check of getOrLoad alone, for callers that can answer in their own turn (the route
   * interceptor): a fresh value of the in-process tier, counted as a hit, or undefined (nothing
   * counted: then call getOrLoad).
   */
  fresh<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    name?: string,
    tags = policy.tags,
  ): Envelope<T> | undefined {
    return this.one.fresh(key, loader, policy, name, tags);
  }

  /**
   * getOrLoad for many keys (see get-or-load-many.ts): values in key order, one loader call for
   * the keys this caller loads; `name` groups the counters (default `getOrLoadMany`).
   */
  getOrLoadMany<T>(
    keys: readonly string[],
    loadMissing: BatchLoader<T>,
    policy: StampedePolicy,
    name?: string,
    tags = policy.tags,
  ): Promise<(T | undefined)[]> {
    return this.many.run(keys, loadMissing, policy, name, tags);
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
   * `soft` marks them stale instead: served within their grace while one refresh runs.
   */
  async invalidateTags(tags: string[], mode: InvalidationMode = 'hard'): Promise<void> {
    checkTags(tags, 'StampedeService.invalidateTags');
    if (tags.length === 0) return;
    await invalidateTagsInStore(
      this.store,
      tags,
      this.tags,
      this.clock,
      (message) => this.apply(message),
      mode,
    );
  }

  /** Makes the value of `key` stale now, on every instance (see expireInStore). */
  async expire(key: string): Promise<void> {
    this.forget(key);
    await expireInStore(this.store, key, this.clock.now());
    this.forget(key);
  }

  /**
   * Invalidates every value of this store's key prefix, on every instance: one new version of
   * the prefix (every value is stamped with it), not a delete per key.
   */
  async clear(): Promise<void> {
    await invalidateTagsInStore(this.store, [ALL_KEYS_TAG], this.tags, this.clock, (message) =>
      this.apply(message),
    );
  }

  /** The fresh value of `key`, from L1 or the store, or undefined; `name` counts the reads. */
  get<T>(key: string, name: string): Promise<T | undefined> {
    return this.entries.get<T>(key, this.metrics.entry(name));
  }

  /** Stores `value` under `key` as a load would, on every instance (see EntryAccess#set). */
  async set<T>(key: string, value: T, options: EntryOptions, name: string): Promise<void> {
    this.forget(key);
    await this.entries.set(key, value, options, this.metrics.entry(name));
  }

  /**
   * Reads the version of the prefix (see clear()) before the first call, so that calls do not
   * pay for it; when the store does not answer, the first call that stamps a value reads it.
   */
  async prepare(): Promise<void> {
    await this.tagStamps.prefetch([ALL_KEYS_TAG]);
  }

  /** Entries and size of the in-process tier. */
  l1Stats(): { entries: number; bytes: number } | undefined {
    return this.held.l1Stats();
  }

  /** Entries and size of the values kept for when the store fails (without L1). */
  lastKnownStats(): { entries: number; bytes: number } {
    return this.held.lastKnownStats();
  }

  /**
   * The values served stale right now because their refresh within grace failed (fail-safe), or
   * undefined when there are none. A key leaves it when a value of it is loaded or read fresh,
   * when it is invalidated, or when its grace ends.
   */
  failSafeState(): StampedeFailSafeState | undefined {
    return this.keys.failSafeState(this.clock.now());
  }

  /** Waits for background refreshes; later calls skip the cache-warming work. */
  async close(): Promise<void> {
    await this.refresher.close();
    this.unobserve();
  }

  private apply(message: InvalidationMessage): void {
    for (const key of message.keys ?? []) this.forget(key);
    if (message.tags) {
      for (const [tag, version] of Object.entries(message.tags)) this.tags.learn(tag, version);
      this.held.l1?.dropTagged(message.tags);
    }
    // Softly invalidated values stay (stale): L1 no longer serves them as hits.
    for (const [tag, version] of Object.entries(message.soft ?? {}))
      this.tags.learnSoft(tag, version);
  }

  private forget(key: string): void {
    this.keys.forget(key);
    this.held.forget(key);
    this.schedule.forget(key);
  }
}
