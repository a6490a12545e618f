import { Controller, Get, Inject } from '@nestjs/common';
import { HealthCheck, HealthCheckService, HealthIndicatorFunction } from '@nestjs/terminus';
import { StampedeHealthIndicator } from '@nest-redis-resilience/stampede/health';
import { cacheConfig, type CacheConfig, healthConfig, type HealthConfig } from '../config';
import { DatabaseHealthIndicator } from './database.health';

/** 200 when the database (and Redis, with the cache on) answer within HEALTH_TIMEOUT; else 503. */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: DatabaseHealthIndicator,
    private readonly cache: StampedeHealthIndicator,
    @Inject(cacheConfig.KEY) private readonly cacheSettings: CacheConfig,
    @Inject(healthConfig.KEY) private readonly settings: HealthConfig,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    const timeout = this.settings.timeoutMs;
    const checks: HealthIndicatorFunction[] = [() => this.database.isHealthy('database', timeout)];
    if (this.cacheSettings.enabled) {
      checks.push(() => this.cache.isHealthy('redis', { timeout }));
    }
    return this.health.check(checks);
  }
}
