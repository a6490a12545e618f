import { Injectable, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { StampedeConfigError } from '../core/errors';
import type { StampedeStore } from '../core/store';
import { STAMPEDE_STORE } from '../nest/stampede.constants';
import { StampedeService } from '../nest/stampede.service';
import { reportWarnings, stampedeHealthWarnings } from './stampede-health.status';

/**
 * Terminus indicator: up when the store answers a ping within `timeout` ms (default 1000), down
 * otherwise. Degraded (terminus 12; on terminus 11 up with a `warning` detail) while the store is
 * in its cool-down after a timeout (`cooldownMs`) or values are served stale because their
 * refresh failed (`failSafe`). A store with an invalidation bus (Redis) that answers says when it
 * does not receive the other instances' invalidations (`invalidationBus: 'down'`, and since when):
 * a bus that is down leaves the check up, since calls are still answered (see `l1.maxStaleMs`).
 * Use: `() => this.stampedeHealth.isHealthy('cache')` in a HealthCheckService.check([...]).
 */
@Injectable()
export class StampedeHealthIndicator implements OnModuleInit {
  private store!: StampedeStore;
  private service: StampedeService | undefined;

  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly health: HealthIndicatorService,
  ) {}

  /** The store is looked up app-wide, so StampedeModule need not be global. */
  onModuleInit(): void {
    try {
      this.store = this.moduleRef.get<StampedeStore>(STAMPEDE_STORE, { strict: false });
      this.service = this.moduleRef.get(StampedeService, { strict: false });
    } catch {
      throw new StampedeConfigError(
        'StampedeHealthIndicator: no StampedeModule in this app. Import StampedeModule.forRoot() (or forRootAsync()) in a module of the app.',
      );
    }
  }

  async isHealthy<const Key extends string = 'stampede'>(
    key: Key = 'stampede' as Key,
    options: { timeout?: number } = {},
  ): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.health.check(key);
    const timeout = options.timeout ?? 1000;
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.store.ping(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeout} ms`)), timeout);
        }),
      ]);
      const latencyMs = Date.now() - started;
      const { details, warnings } = stampedeHealthWarnings({
        cooldownMs: this.store.cooldownRemainingMs?.() ?? 0,
        failSafe: this.service?.failSafeState(),
        now: Date.now(),
      });
      return reportWarnings<HealthIndicatorResult<Key>>(
        indicator,
        { store: this.store.name, latencyMs, ...this.busDetails(), ...details },
        warnings,
      );
    } catch (err) {
      return indicator.down({
        store: this.store.name,
        message: err instanceof Error ? err.message : String(err),
      });
    } finally {
      clearTimeout(timer);
    }
  }

  private busDetails(): { invalidationBus?: 'down'; invalidationBusDownMs?: number } {
    const since = this.store.invalidationsDownSince?.();
    if (since === undefined) return {};
    return { invalidationBus: 'down', invalidationBusDownMs: Math.max(0, Date.now() - since) };
  }
}
