import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, ModulesContainer } from '@nestjs/core';
import { HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { StampedeConfigError } from '../core/errors';
import type { StampedeStore } from '../core/store';
import {
  describeConfigurations,
  findStampedeConfigurations,
  StampedeConfiguration,
} from '../nest/stampede-configuration';
import { DEFAULT_STAMPEDE_NAME } from '../nest/stampede.constants';
import { reportWarnings, stampedeHealthWarnings } from './stampede-health.status';

/**
 * Terminus indicator: up when the store answers a ping within `timeout` ms (default 1000), down
 * otherwise. Degraded (terminus 12; on terminus 11 up with a `warning` detail) while the store is
 * in its cool-down after a timeout (`cooldownMs`) or values are served stale because their
 * refresh failed (`failSafe`). A store with an invalidation bus (Redis) that answers says when it
 * does not receive the other instances' invalidations (`invalidationBus: 'down'`, and since when):
 * a bus that is down leaves the check up, since calls are still answered (see `l1.maxStaleMs`).
 * Use: `() => this.stampedeHealth.isHealthy('cache')` in a HealthCheckService.check([...]);
 * `isHealthy('sessions-cache', { name: 'sessions' })` checks a named configuration, and
 * `...this.stampedeHealth.checks()` gives one entry per configuration of the app.
 */
@Injectable()
export class StampedeHealthIndicator implements OnModuleInit {
  private configurations = new Map<string, StampedeConfiguration>();

  constructor(
    private readonly modules: ModulesContainer,
    private readonly health: HealthIndicatorService,
  ) {}

  /** The configurations are looked up app-wide, so StampedeModule need not be global. */
  onModuleInit(): void {
    this.configurations = findStampedeConfigurations(new DiscoveryService(this.modules));
    if (this.configurations.size === 0) {
      throw new StampedeConfigError(
        'StampedeHealthIndicator: no StampedeModule in this app. Import StampedeModule.forRoot() (or forRootAsync()) in a module of the app.',
      );
    }
  }

  /**
   * One check per configuration of the app: the default one under `key` (default `stampede`),
   * each named one under `<key>:<name>`.
   */
  checks(
    options: { key?: string; timeout?: number } = {},
  ): Array<() => Promise<HealthIndicatorResult>> {
    const key = options.key ?? 'stampede';
    return [...this.configurations.keys()].map((name) => {
      const entry = name === DEFAULT_STAMPEDE_NAME ? key : `${key}:${name}`;
      return () => this.isHealthy(entry, { timeout: options.timeout, name });
    });
  }

  /** Checks the default configuration, or the one `name`d (`StampedeModule.forRoot({ name })`). */
  async isHealthy<const Key extends string = 'stampede'>(
    key: Key = 'stampede' as Key,
    options: { timeout?: number; name?: string } = {},
  ): Promise<HealthIndicatorResult<Key>> {
    const name = options.name ?? DEFAULT_STAMPEDE_NAME;
    const configuration = this.configurations.get(name);
    if (!configuration) {
      throw new StampedeConfigError(
        `StampedeHealthIndicator: no stampede configuration '${name}' in this app (it has ` +
          `${describeConfigurations(this.configurations)})`,
      );
    }
    const { store, service } = configuration;
    const indicator = this.health.check(key);
    const timeout = options.timeout ?? 1000;
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        store.ping(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeout} ms`)), timeout);
        }),
      ]);
      const latencyMs = Date.now() - started;
      const { details, warnings } = stampedeHealthWarnings({
        cooldownMs: store.cooldownRemainingMs?.() ?? 0,
        failSafe: service.failSafeState(),
        now: Date.now(),
      });
      return reportWarnings<HealthIndicatorResult<Key>>(
        indicator,
        { store: store.name, latencyMs, ...busDetails(store), ...details },
        warnings,
      );
    } catch (err) {
      return indicator.down({
        store: store.name,
        message: err instanceof Error ? err.message : String(err),
      });
    } finally {
      clearTimeout(timer);
    }
  }
}

function busDetails(store: StampedeStore): {
  invalidationBus?: 'down';
  invalidationBusDownMs?: number;
} {
  const since = store.invalidationsDownSince?.();
  if (since === undefined) return {};
  return { invalidationBus: 'down', invalidationBusDownMs: Math.max(0, Date.now() - since) };
}
