import {
  DynamicModule,
  Inject,
  Injectable,
  Module,
  OnApplicationBootstrap,
  OnApplicationShutdown,
  OnModuleDestroy,
} from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { RedisStreamsHealthModule } from '@nest-redis-resilience/stream-batch-ack/health';
import { Redis } from 'ioredis';
import {
  IdempotencyStore,
  RedisStreamsModule,
  ServerRedisStreams,
} from '@nest-redis-resilience/stream-batch-ack';
import { CandleStore } from './candles/candle-store';
import { CollectorModule } from './collector/collector.module';
import { TicksConfig } from './config';
import { createTicksConsumerController } from './consumer/ticks-consumer.controller';
import { TicksMetrics } from './consumer/ticks.metrics';
import { HealthController } from './http/health.controller';
import { MetricsController } from './http/metrics.controller';
import { SymbolsController } from './http/symbols.controller';
import { TICKS_CONFIG, TICKS_REDIS } from './ticks.constants';

/** Prunes the applied-id set on a timer; writes pending candles and closes Redis at shutdown. */
@Injectable()
export class CandleStoreLifecycle
  implements OnApplicationBootstrap, OnModuleDestroy, OnApplicationShutdown
{
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    @Inject(CandleStore) private readonly store: CandleStore,
    @Inject(TICKS_REDIS) private readonly redis: Redis,
    @Inject(TICKS_CONFIG) private readonly config: TicksConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => void this.store.pruneQuietly(), this.config.pruneIntervalMs);
    this.timer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
  }

  /** Runs after the microservice closed (its handlers finished and its acks were flushed). */
  async onApplicationShutdown(): Promise<void> {
    await this.store.drain();
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}

/** The consumer + HTTP app (and the collector when `config.collectorInProcess`). */
@Module({})
export class TicksAppModule {
  static register(config: TicksConfig, server: ServerRedisStreams): DynamicModule {
    return {
      module: TicksAppModule,
      imports: [
        TerminusModule,
        RedisStreamsHealthModule,
        RedisStreamsModule.forRoot({
          captureErrors: false,
          idempotency: { ttlMs: config.idempotency.ttlMs, maxSize: config.idempotency.maxSize },
        }),
        ...(config.collectorInProcess ? [CollectorModule.register(config.collector)] : []),
      ],
      controllers: [
        createTicksConsumerController(config),
        SymbolsController,
        HealthController,
        MetricsController,
      ],
      providers: [
        { provide: TICKS_CONFIG, useValue: config },
        { provide: ServerRedisStreams, useValue: server },
        {
          provide: TICKS_REDIS,
          useFactory: () =>
            new Redis(config.redisUrl, { maxRetriesPerRequest: 2, connectionName: 'demo-ticks' }),
        },
        {
          provide: CandleStore,
          inject: [TICKS_REDIS],
          useFactory: (redis: Redis) =>
            new CandleStore(redis, {
              keyPrefix: config.keyPrefix,
              stream: config.stream,
              group: config.group,
              keep: config.candlesKeep,
              maxBatch: config.applyBatchMax,
            }),
        },
        { provide: TicksMetrics, useFactory: () => new TicksMetrics() },
        {
          // The consumer's in-process LRU of handled entry ids (this module's provider wins over
          // the global one of RedisStreamsModule).
          provide: IdempotencyStore,
          useFactory: () => new IdempotencyStore({ idempotency: config.idempotency }),
        },
        CandleStoreLifecycle,
      ],
    };
  }
}
