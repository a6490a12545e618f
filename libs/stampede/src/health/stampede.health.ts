import { Injectable, OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { HealthIndicatorService } from '@nestjs/terminus';
import { StampedeConfigError } from '../core/errors';
import type { StampedeStore } from '../core/store';
import { STAMPEDE_STORE } from '../nest/stampede.constants';

/**
 * Terminus indicator: up when the store answers a ping within `timeout` ms (default 1000). A
 * store with an invalidation bus (Redis) that answers says when it does not receive the other
 * instances' invalidations (`invalidationBus: 'down'`, and since when): a bus that is down leaves
 * the check up, since calls are still answered (see `l1.maxStaleMs`).
 * Use: `() => this.stampedeHealth.isHealthy('cache')` in a HealthCheckService.check([...]).
 */
@Injectable()
export class StampedeHealthIndicator implements OnModuleInit {
  private store!: StampedeStore;

  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly health: HealthIndicatorService,
  ) {}

  /** The store is looked up app-wide, so StampedeModule need not be global. */
  onModuleInit(): void {
    try {
      this.store = this.moduleRef.get<StampedeStore>(STAMPEDE_STORE, { strict: false });
    } catch {
      throw new StampedeConfigError(
        'StampedeHealthIndicator: no StampedeModule in this app. Import StampedeModule.forRoot() (or forRootAsync()) in a module of the app.',
      );
    }
  }

  async isHealthy<const Key extends string = 'stampede'>(
    key: Key = 'stampede' as Key,
    options: { timeout?: number } = {},
  ) {
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
      return indicator.up({
        store: this.store.name,
        latencyMs: Date.now() - started,
        ...this.busDetails(),
      });
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
