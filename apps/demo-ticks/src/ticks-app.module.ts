import { DynamicModule, Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { RedisStreamsHealthModule } from '@nest-redis-resilience/stream-batch-ack/health';
import { Redis } from 'ioredis';
import { RedisStreamsModule, ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { CandleStore } from './candles/candle-store';
import { CollectorModule } from './collector/collector.module';
import { TicksConfig } from './config';
import { createTicksConsumerController } from './consumer/ticks-consumer.controller';
import { TicksMetrics } from './consumer/ticks.metrics';
import { HealthController } from './http/health.controller';
import { MetricsController } from './http/metrics.controller';
import { SymbolsController } from './http/symbols.controller';
import { TICKS_CONFIG, TICKS_REDIS } from './ticks.constants';

/** Closes the app's Redis connection at shutdown, after the microservice closed. */
@Injectable()
export class TicksRedisLifecycle implements OnApplicationShutdown {
  constructor(@Inject(TICKS_REDIS) private readonly redis: Redis) {}

  async onApplicationShutdown(): Promise<void> {
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
        RedisStreamsModule.forRoot({ captureErrors: false }),
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
        TicksRedisLifecycle,
      ],
    };
  }
}
