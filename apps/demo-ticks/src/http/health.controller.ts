import { Controller, Get, Inject } from '@nestjs/common';
import {
  HealthCheck,
  HealthCheckResult,
  HealthCheckService,
  HealthIndicatorResult,
  HealthIndicatorService,
} from '@nestjs/terminus';
import { Cluster, Redis } from 'ioredis';
import { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { RedisStreamsHealthIndicator } from '@nest-redis-resilience/stream-batch-ack/health';
import { InjectConfig } from '../config/ticks-config.module';
import { ConsumerSettings, HttpSettings } from '../config/ticks-env.schema';
import { measureReclaimBacklog, ReclaimBacklog } from '../consumer/reclaim-backlog';
import { tickPlacement } from '../redis/tick-streams';
import { TICKS_REDIS } from '../ticks.constants';

/**
 * GET /health: `redis` (PING), `stream` (the group's lag and pending count) and `reclaim` (entries
 * of crashed consumers waiting to be claimed). A reclaim backlog is reported as degraded, not
 * down: the consumer is working through it, and restarting it would only delay that.
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly streams: RedisStreamsHealthIndicator,
    @Inject(ServerRedisStreams) private readonly server: ServerRedisStreams,
    @Inject(TICKS_REDIS) private readonly redis: Redis | Cluster,
    @InjectConfig('consumer') private readonly consumer: ConsumerSettings,
    @InjectConfig('http') private readonly http: HttpSettings,
  ) {}

  @Get()
  @HealthCheck()
  check(): Promise<HealthCheckResult> {
    const backlog = this.withTimeout(
      measureReclaimBacklog(this.redis, {
        stream: tickPlacement(this.consumer).streams,
        group: this.consumer.group,
        minIdleMs: this.consumer.claim.minIdleMs,
      }),
    );
    backlog.catch(() => undefined); // reported by the `reclaim` check
    return this.health.check([
      () => this.ping(),
      () => this.stream(backlog),
      () => this.reclaim(backlog),
    ]);
  }

  /** The connection the HTTP reads and the candle writes use. */
  private async ping(): Promise<HealthIndicatorResult> {
    const indicator = this.indicators.check('redis');
    if (this.redis.status !== 'ready')
      return indicator.down({ message: `Redis connection is ${this.redis.status}` });
    const started = Date.now();
    try {
      await this.withTimeout(this.redis.ping());
      return indicator.up({ latencyMs: Date.now() - started });
    } catch (err) {
      return indicator.down({ message: (err as Error).message });
    }
  }

  /**
   * The library's stream indicator (connection, group, lag), with the pending limit applied here:
   * the entries waiting to be reclaimed do not count against HEALTH_MAX_PENDING.
   */
  private async stream(backlog: Promise<ReclaimBacklog>): Promise<HealthIndicatorResult> {
    const { stream, group } = this.consumer;
    const { health } = this.http;
    const result = await this.streams.isHealthy('stream', {
      client: this.server,
      stream,
      group,
      maxLag: health.maxLag,
      timeoutMs: health.timeoutMs,
    });
    const { status, message, ...details } = result.stream as Record<string, unknown>;
    if (typeof details.pending !== 'number') return result; // no answer from Redis
    const waiting = (await backlog.catch(() => undefined))?.backlog ?? 0;
    const own = details.pending - waiting;
    const problems = typeof message === 'string' ? [message] : [];
    if (own > health.maxPending)
      problems.push(
        `pending ${own} > ${health.maxPending}` +
          (waiting > 0 ? ` (not counting ${waiting} entries waiting to be reclaimed)` : ''),
      );
    const indicator = this.indicators.check('stream');
    if (problems.length > 0) return indicator.down({ ...details, message: problems.join(', ') });
    return status === 'up' ? indicator.up(details) : result;
  }

  /** Degraded (up, `degraded: true`) while entries of crashed consumers wait to be reclaimed. */
  private async reclaim(backlog: Promise<ReclaimBacklog>): Promise<HealthIndicatorResult> {
    const indicator = this.indicators.check('reclaim');
    try {
      const { backlog: count, consumers } = await backlog;
      if (count === 0) return indicator.up({ degraded: false, backlog: 0, consumers });
      const idle = Object.keys(consumers).length;
      return indicator.up({
        degraded: true,
        backlog: count,
        consumers,
        message: `${count} pending entries of ${idle} idle consumer(s) (idle over ${this.consumer.claim.minIdleMs} ms) wait to be reclaimed`,
      });
    } catch (err) {
      return indicator.down({ message: (err as Error).message });
    }
  }

  private async withTimeout<T>(work: Promise<T>): Promise<T> {
    const ms = this.http.health.timeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        work,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}
