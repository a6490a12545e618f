import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { Duration, toMs } from '../core/duration';
import { StampedeConfigError } from '../core/errors';
import { StampedeEventListener, StampedeEventName, StampedeEvents } from '../core/events';
import type { Envelope } from '../core/envelope';
import type { MethodMetrics } from '../core/metrics';
import { checkTags, PolicyOptions, resolvePolicy, StampedePolicy } from '../core/policy';
import {
  BatchLoader,
  StampedeFailSafeState,
  Loader,
  StampedeEngine,
} from '../core/stampede-engine';
import type { InvalidationMode, StampedeStore } from '../core/store';
import { createTelemetry } from '../telemetry/otel-telemetry';
import { findEventEmitter } from './event-emitter.bridge';
import { codecOf, l1Limits } from './stampede-store.factory';
import { STAMPEDE_STORE } from './stampede.constants';
import { STAMPEDE_MODULE_OPTIONS } from './stampede.module-definition';
import type { StampedeModuleOptions } from './stampede.options';

export const DEFAULT_TTL_MS = 60_000;

/** How `StampedeService.set` stores a value. */
export interface StampedeSetOptions {
  /** Time to live; default the module's `defaultTtl`. */
  ttl?: Duration;
  /** Kept and served stale this long past the TTL by getOrLoad and the decorators. Default none. */
  grace?: Duration;
  /** Tags of the value, for `invalidateTags`. */
  tags?: string[];
  /** Spread the TTL over ttl * (1 +- ratio), ratio in [0, 1). Default none. */
  jitter?: number;
  /** Keep the value in this instance's in-process tier (when the module has one). Default true. */
  l1?: boolean;
}

/** How `StampedeService.invalidateTags` invalidates. */
export interface InvalidateTagsOptions {
  /**
   * `hard` (default): the values are dropped, the next caller loads. `soft`: the values turn
   * stale; with grace, callers get them at once while one refresh runs; without, as `hard`.
   */
  mode?: InvalidationMode;
}

/**
 * The get-or-load flow for use without decorators; the decorated methods go through it too.
 * Reports through OpenTelemetry (see the `telemetry` option) and raises operator events (`on()`,
 * and @nestjs/event-emitter when the app imported EventEmitterModule). Closes the store on
 * application shutdown.
 */
@Injectable()
export class StampedeService implements OnModuleInit, OnApplicationShutdown {
  readonly defaultTtl: number;
  private readonly engine: StampedeEngine;
  private readonly events: StampedeEvents;
  private readonly policies = new WeakMap<PolicyOptions, StampedePolicy>();

  constructor(
    @Inject(STAMPEDE_STORE) readonly store: StampedeStore,
    @Inject(STAMPEDE_MODULE_OPTIONS) options: StampedeModuleOptions,
    private readonly moduleRef: ModuleRef,
  ) {
    this.defaultTtl =
      options.defaultTtl === undefined
        ? DEFAULT_TTL_MS
        : toMs(options.defaultTtl, 'StampedeModule defaultTtl');
    const logger = new Logger('Stampede');
    this.events = new StampedeEvents((err) =>
      logger.warn(
        `a stampede event listener threw: ${err instanceof Error ? err.message : String(err)}`,
      ),
    );
    this.engine = new StampedeEngine({
      store,
      logger: { warn: (message) => logger.warn(message) },
      l1: l1Limits(options.l1),
      lastKnown: options.lastKnown,
      codec: codecOf(options),
      telemetry: createTelemetry(options.telemetry),
      events: this.events,
    });
  }

  /**
   * Forwards the events to @nestjs/event-emitter, for `@OnEvent('stampede.store.unavailable')`,
   * and reads the version of the key prefix (see `clear()`) once, so that calls do not.
   */
  async onModuleInit(): Promise<void> {
    const emitter = findEventEmitter(this.moduleRef);
    if (emitter) this.events.sink = (event, payload) => emitter.emit(event, payload);
    await this.engine.prepare();
  }

  /**
   * Listens to an operator event: `stampede.lock.timeout`, `stampede.store.unavailable`,
   * `stampede.store.recovered`, `stampede.load.timeout`, `stampede.failsafe`,
   * `stampede.bus.down`, `stampede.bus.up` (see STAMPEDE_EVENTS). Listeners run synchronously:
   * keep them short.
   */
  on<E extends StampedeEventName>(event: E, listener: StampedeEventListener<E>): this {
    this.events.on(event, listener);
    return this;
  }

  /** Stops a listener added with `on()`. */
  off<E extends StampedeEventName>(event: E, listener: StampedeEventListener<E>): this {
    this.events.off(event, listener);
    return this;
  }

  /**
   * Returns the cached value of `key`, or runs `loader` once (per key, per the policy) and caches it.
   * `policy` defaults to caching with the module's defaultTtl; `name` groups the metrics (default
   * `getOrLoad`: never the key). A value the serializer cannot write rejects with a
   * StampedeSerializationError and is not cached.
   */
  getOrLoad<T>(
    key: string,
    loader: Loader<T>,
    policy: PolicyOptions = {},
    name?: string,
  ): Promise<T> {
    return this.engine.getOrLoad(key, loader, this.policyFor(policy), name);
  }

  /**
   * getOrLoad for many keys: the values of `keys`, in their order. Values in the cache cost one
   * MGET (one per slot on a Cluster); the missing keys are loaded by one `loadMissing(keys)` call
   * returning a Record or Map by key, with the same per-key protection as getOrLoad (single-flight
   * and, with `lock`, a lock per key: keys another caller or instance is loading are waited for,
   * not loaded again). A key `loadMissing` leaves out is `undefined` and not cached; its error
   * rejects the calls that wait for the keys it was asked for. `name` groups the metrics, which
   * count keys (default `getOrLoadMany`).
   */
  getOrLoadMany<T>(
    keys: readonly string[],
    loadMissing: BatchLoader<T>,
    policy: PolicyOptions = {},
    name?: string,
  ): Promise<(T | undefined)[]> {
    let resolved: StampedePolicy;
    try {
      resolved = this.policyFor(policy, 'StampedeService.getOrLoadMany');
    } catch (err) {
      return Promise.reject(err);
    }
    return this.engine.getOrLoadMany(keys, loadMissing, resolved, name);
  }

  /** getOrLoadMany with an already validated policy (what @CacheableMany methods use). */
  runMany<T>(
    keys: readonly string[],
    loadMissing: BatchLoader<T>,
    policy: StampedePolicy,
    name: string,
    tags?: string[],
  ): Promise<(T | undefined)[]> {
    return this.engine.getOrLoadMany(keys, loadMissing, policy, name, tags);
  }

  /** Runs a call with an already validated policy (what the decorated methods use). */
  run<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    name: string,
    tags?: string[],
  ): Promise<T> {
    return this.engine.getOrLoad(key, loader, policy, name, tags);
  }

  /**
   * The check of `run` alone, for callers that can answer in their own turn: the envelope of a
   * fresh value of the in-process tier (counted as a call and a hit; an XFetch early refresh
   * starts as on any hit), or undefined, counting nothing: then call `run`.
   */
  fresh<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    name: string,
    tags?: string[],
  ): Envelope<T> | undefined {
    return this.engine.fresh(key, loader, policy, name, tags ?? policy.tags);
  }

  /** Validates a policy now; errors name `where`. */
  resolve(options: PolicyOptions, where: string): StampedePolicy {
    return resolvePolicy(options, this.defaultTtl, where);
  }

  /**
   * Drops the cached value of `key` (the same key the decorator or getOrLoad used), on every
   * instance: with Redis, the delete and the broadcast are one step. When Redis does not confirm
   * it, rejects with a StampedeInvalidationError whose `pending` says whether it may still happen.
   */
  invalidate(key: string): Promise<void> {
    return this.engine.invalidate(key);
  }

  /**
   * Drops every value stamped with one of `tags` (see the `tags` option), on every instance: with
   * Redis, each tag's new version and its broadcast are one step. When Redis does not confirm a
   * tag, rejects with a StampedeInvalidationError naming those `tags`, whose `pending` says
   * whether they may still be invalidated.
   */
  invalidateTags(tags: string[], options: InvalidateTagsOptions = {}): Promise<void> {
    const mode = options.mode ?? 'hard';
    if (mode !== 'hard' && mode !== 'soft') {
      return Promise.reject(
        new StampedeConfigError(
          `StampedeService.invalidateTags: mode must be 'hard' or 'soft', got ${String(mode)}`,
        ),
      );
    }
    return this.engine.invalidateTags(tags, mode);
  }

  /**
   * The fresh value of `key` (the same key the decorator or getOrLoad used), from the
   * in-process tier or the store; undefined when it is missing, expired, stale or invalidated.
   * No loader runs. When Redis does not answer, a fresh value held here, else undefined.
   */
  get<T = unknown>(key: string): Promise<T | undefined> {
    return this.engine.get<T>(key, 'StampedeService.get');
  }

  /**
   * Stores `value` under `key` as a load would, so getOrLoad and the decorators serve it: TTL
   * (default the module's defaultTtl), grace and tags as given. This instance keeps it in its
   * in-process tier; the others drop theirs (with Redis, the write and the broadcast are one
   * step). Rejects when the store does not confirm it; `undefined` cannot be stored.
   */
  async set<T>(key: string, value: T, options: StampedeSetOptions = {}): Promise<void> {
    const where = 'StampedeService.set';
    if (value === undefined) {
      throw new StampedeConfigError(`${where}: undefined cannot be cached; use delete(key)`);
    }
    const jitter = options.jitter;
    if (jitter !== undefined && !(typeof jitter === 'number' && jitter >= 0 && jitter < 1)) {
      throw new StampedeConfigError(`${where}: jitter must be in [0, 1), got ${String(jitter)}`);
    }
    await this.engine.set(
      key,
      value,
      {
        ttl: options.ttl === undefined ? this.defaultTtl : toMs(options.ttl, `${where}: ttl`),
        grace:
          options.grace === undefined || options.grace === 0
            ? 0
            : toMs(options.grace, `${where}: grace`),
        tags: options.tags === undefined ? undefined : checkTags(options.tags, where),
        jitter,
        l1: options.l1 ?? true,
      },
      'StampedeService.set',
    );
  }

  /** The same as `invalidate(key)`. */
  delete(key: string): Promise<void> {
    return this.engine.invalidate(key);
  }

  /**
   * Drops every value of this module's key prefix, on every instance. With Redis it is one new
   * version of the prefix (every value is stamped with it), not a SCAN and a DEL per key: the old
   * values are ignored from then on and expire by themselves. Rejects as `invalidateTags`.
   */
  clear(): Promise<void> {
    return this.engine.clear();
  }

  /**
   * Makes the value of `key` stale now, on every instance, without dropping it: with grace,
   * the next caller gets it at once while one refresh runs (one across instances with a lock);
   * without grace, the same as `invalidate(key)`. Rejects as `invalidate`.
   */
  expire(key: string): Promise<void> {
    return this.engine.expire(key);
  }

  /** Entries and size (characters) of the in-process tier, or undefined without one. */
  l1Stats(): { entries: number; bytes: number } | undefined {
    return this.engine.l1Stats();
  }

  /** Entries and size (characters) of the values kept for when Redis fails (see `lastKnown`). */
  lastKnownStats(): { entries: number; bytes: number } {
    return this.engine.lastKnownStats();
  }

  /**
   * The values served stale right now because their refresh within grace failed (fail-safe):
   * how many keys, their methods and since when (epoch ms); undefined when there are none. The
   * health indicator reports it as degraded.
   */
  failSafeState(): StampedeFailSafeState | undefined {
    return this.engine.failSafeState();
  }

  /** Counters per method name (`Class.method`) or getOrLoad name (`getOrLoad` without one). */
  metrics(): Record<string, MethodMetrics> {
    return this.engine.metrics.snapshot();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.engine.close();
    await this.store.close();
  }

  private policyFor(options: PolicyOptions, where = 'StampedeService.getOrLoad'): StampedePolicy {
    // Cached per options object, so a policy kept in a constant is validated once.
    let policy = this.policies.get(options);
    if (!policy) {
      policy = this.resolve(options, where);
      this.policies.set(options, policy);
    }
    return policy;
  }
}
