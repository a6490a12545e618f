import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import type { StampedeStore } from '../core/store';
import { STAMPEDE_STORE } from './stampede.constants';

/**
 * Terminus indicator: up when the store answers a ping within `timeout` ms (default 1000).
 * Use: `() => this.stampedeHealth.isHealthy('cache')` in a HealthCheckService.check([...]).
 */
@Injectable()
export class StampedeHealthIndicator {
  constructor(
    @Inject(STAMPEDE_STORE) private readonly store: StampedeStore,
    private readonly health: HealthIndicatorService,
  ) {}

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
      return indicator.up({ store: this.store.name, latencyMs: Date.now() - started });
    } catch (err) {
      return indicator.down({
        store: this.store.name,
        message: err instanceof Error ? err.message : String(err),
      });
    } finally {
      clearTimeout(timer);
    }
  }
}
