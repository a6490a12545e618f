import { Controller, Get, Inject } from '@nestjs/common';
import {
  HealthCheck,
  HealthCheckResult,
  HealthCheckService,
  HealthIndicatorService,
} from '@nestjs/terminus';
import { Redis } from 'ioredis';
import { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { RedisStreamsHealthIndicator } from '@nest-redis-resilience/stream-batch-ack/health';
import { TicksConfig } from '../config';
import { TICKS_CONFIG, TICKS_REDIS } from '../ticks.constants';

@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly streams: RedisStreamsHealthIndicator,
    @Inject(ServerRedisStreams) private readonly server: ServerRedisStreams,
    @Inject(TICKS_REDIS) private readonly redis: Redis,
    @Inject(TICKS_CONFIG) private readonly config: TicksConfig,
  ) {}

  @Get()
  @HealthCheck()
  check(): Promise<HealthCheckResult> {
    const { stream, group, health } = this.config;
    return this.health.check([
      () => this.ping(),
      () =>
        this.streams.isHealthy('stream', {
          client: this.server,
          stream,
          group,
          maxLag: health.maxLag,
          maxPending: health.maxPending,
          timeoutMs: health.timeoutMs,
        }),
    ]);
  }

  /** The connection the HTTP reads and the candle writes use. */
  private async ping() {
    const indicator = this.indicators.check('redis');
    if (this.redis.status !== 'ready')
      return indicator.down({ message: `Redis connection is ${this.redis.status}` });
    const started = Date.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        this.redis.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${this.config.health.timeoutMs} ms`)),
            this.config.health.timeoutMs,
          );
        }),
      ]);
      return indicator.up({ latencyMs: Date.now() - started });
    } catch (err) {
      return indicator.down({ message: (err as Error).message });
    } finally {
      clearTimeout(timer);
    }
  }
}
