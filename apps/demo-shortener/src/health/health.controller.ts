import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { HealthIndicatorResult } from '@nestjs/terminus';
import { StampedeHealthIndicator } from '@nest-redis-resilience/stampede/health';
import type { FastifyReply } from 'fastify';
import { cacheConfig, type CacheConfig, healthConfig, type HealthConfig } from '../config';
import { DatabaseHealthIndicator } from './database.health';
import { HealthReport, healthReport } from './health-report';

/**
 * - `GET /health/live`: 200 while the process answers HTTP (restart it when this fails).
 * - `GET /health/ready`: 200 when the app can serve: the database answers within
 *   HEALTH_TIMEOUT. Redis down is `degraded` (redirects go to the database), still 200. 503
 *   when the database does not answer: what a load balancer should probe.
 * - `GET /health`: the same verdict and details (kept for existing probes and people).
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly database: DatabaseHealthIndicator,
    private readonly cache: StampedeHealthIndicator,
    @Inject(cacheConfig.KEY) private readonly cacheSettings: CacheConfig,
    @Inject(healthConfig.KEY) private readonly settings: HealthConfig,
  ) {}

  @Get('live')
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('ready')
  ready(@Res({ passthrough: true }) reply: FastifyReply): Promise<HealthReport> {
    return this.report(reply);
  }

  @Get()
  check(@Res({ passthrough: true }) reply: FastifyReply): Promise<HealthReport> {
    return this.report(reply);
  }

  private async report(reply: FastifyReply): Promise<HealthReport> {
    const timeout = this.settings.timeoutMs;
    const [database, redis] = await Promise.all([
      this.database.isHealthy('database', timeout),
      this.cacheSettings.enabled ? this.cache.isHealthy('redis', { timeout }) : undefined,
    ]);
    const optional: HealthIndicatorResult[] = redis ? [redis] : [];
    const report = healthReport([database], optional);
    void reply.status(report.status === 'error' ? 503 : 200);
    return report;
  }
}
