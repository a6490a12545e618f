import { DynamicModule, Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { RedisStreamsHealthModule } from '@nest-redis-resilience/stream-batch-ack/health';
import { Registry } from 'prom-client';
import { RedisStreamsModule, ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { CandleStore } from './candles/candle-store';
import { CollectorModule } from './collector/collector.module';
import { configToken, ticksConfigModule } from './config/ticks-config.module';
import { createTicksRedis, TicksRedis } from './redis/redis-connection';
import { tickPlacement } from './redis/tick-streams';
import {
  CandlesSettings,
  ConsumerSettings,
  RedisSettings,
  TicksSettings,
} from './config/ticks-env.schema';
import { TicksConsumerController } from './consumer/ticks-consumer.controller';
import { HealthController } from './http/health.controller';
import { SymbolsController } from './http/symbols.controller';
import { ticksMetricProviders, ticksPrometheusModule } from './metrics/ticks-metrics.providers';
import { TicksMetrics } from './metrics/ticks.metrics';
import { TicksLiveFeed } from './page/live-feed';
import { PageAssets } from './page/page-assets';
import { PageController } from './page/page.controller';
import { TICKS_REDIS } from './ticks.constants';

/** Closes the app's Redis connection at shutdown, after the microservice closed. */
@Injectable()
export class TicksRedisLifecycle implements OnApplicationShutdown {
  constructor(@Inject(TICKS_REDIS) private readonly redis: TicksRedis) {}

  async onApplicationShutdown(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }
}

/** The consumer + HTTP app (and the collector when `collector.inProcess`). */
@Module({})
export class TicksAppModule {
  /**
   * `settings` (from parseTicksEnv) become the ConfigModule namespaces; `server` is the instance
   * passed to connectMicroservice (the consumer dead-letters through its options, the health
   * check reads it).
   */
  static register(settings: TicksSettings, server: ServerRedisStreams): DynamicModule {
    const metricsRegistry = new Registry(); // this app's (see ticks-metrics.providers.ts)
    return {
      module: TicksAppModule,
      imports: [
        ticksConfigModule(settings),
        // The handler runs through Nest: dead letters of failed batches keep its original error.
        RedisStreamsModule.forRoot(),
        TerminusModule,
        RedisStreamsHealthModule,
        ticksPrometheusModule(metricsRegistry),
        ...(settings.collector.inProcess ? [CollectorModule] : []),
      ],
      controllers: [TicksConsumerController, SymbolsController, HealthController, PageController],
      providers: [
        { provide: ServerRedisStreams, useValue: server },
        {
          provide: TICKS_REDIS,
          inject: [configToken('redis')],
          useFactory: (redis: RedisSettings) => createTicksRedis(redis, 'demo-ticks'),
        },
        {
          provide: CandleStore,
          inject: [TICKS_REDIS, configToken('candles'), configToken('consumer')],
          useFactory: (redis: TicksRedis, candles: CandlesSettings, consumer: ConsumerSettings) =>
            new CandleStore(redis, {
              keyPrefix: candles.keyPrefix,
              stream: consumer.stream,
              group: consumer.group,
              keep: candles.keep,
              maxBatch: candles.applyBatchMax,
              placement: tickPlacement(consumer),
            }),
        },
        ...ticksMetricProviders(metricsRegistry),
        TicksMetrics,
        TicksRedisLifecycle,
        { provide: PageAssets, useFactory: () => PageAssets.load() },
        TicksLiveFeed,
      ],
    };
  }
}
