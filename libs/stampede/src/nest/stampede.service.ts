import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { toMs } from '../core/duration';
import { StampedeEventListener, StampedeEventName, StampedeEvents } from '../core/events';
import type { Envelope } from '../core/envelope';
import type { MethodMetrics } from '../core/metrics';
import { PolicyOptions, resolvePolicy, StampedePolicy } from '../core/policy';
import { StampedeFailSafeState, Loader, StampedeEngine } from '../core/stampede-engine';
import type { StampedeStore } from '../core/store';
import { createTelemetry } from '../telemetry/otel-telemetry';
import { findEventEmitter } from './event-emitter.bridge';
import { codecOf, l1Limits } from './stampede-store.factory';
import { STAMPEDE_STORE } from './stampede.constants';
import { STAMPEDE_MODULE_OPTIONS } from './stampede.module-definition';
import type { StampedeModuleOptions } from './stampede.options';

export const DEFAULT_TTL_MS = 60_000;

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

  /** Forwards the events to @nestjs/event-emitter, for `@OnEvent('stampede.store.unavailable')`. */
  onModuleInit(): void {
    const emitter = findEventEmitter(this.moduleRef);
    if (emitter) this.events.sink = (event, payload) => emitter.emit(event, payload);
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
  invalidateTags(tags: string[]): Promise<void> {
    return this.engine.invalidateTags(tags);
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

  private policyFor(options: PolicyOptions): StampedePolicy {
    // Cached per options object, so a policy kept in a constant is validated once.
    let policy = this.policies.get(options);
    if (!policy) {
      policy = this.resolve(options, 'StampedeService.getOrLoad');
      this.policies.set(options, policy);
    }
    return policy;
  }
}
