import { Controller, Get, Inject } from '@nestjs/common';
import { HealthCheck, HealthCheckService, HealthIndicatorFunction } from '@nestjs/terminus';
import { StampedeHealthIndicator } from '@nest-redis-resilience/stampede/health';
import type { ShortenerConfig } from '../config';
import { SHORTENER_CONFIG } from '../shortener.constants';
import { DatabaseHealthIndicator } from './database.health';

/** 200 when the database (and Redis, with the cache on) answer within HEALTH_TIMEOUT; else 503. */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly database: DatabaseHealthIndicator,
    private readonly cache: StampedeHealthIndicator,
    @Inject(SHORTENER_CONFIG) private readonly config: ShortenerConfig,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    const timeout = this.config.healthTimeoutMs;
    const checks: HealthIndicatorFunction[] = [() => this.database.isHealthy('database', timeout)];
    if (this.config.cacheEnabled) {
      checks.push(() => this.cache.isHealthy('redis', { timeout }));
    }
    return this.health.check(checks);
  }
}
