import { DynamicModule, Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { StampedeHealthModule } from '@nest-redis-resilience/stampede/health';
import { StampedeModule } from '@nest-redis-resilience/stampede';
import type { ShortenerConfig } from './config';
import { GuardedUrlRepository } from './db/guarded-url-repository';
import { createUrlRepository } from './db/repository.factory';
import type { UrlRepository } from './db/url-repository';
import { DatabaseHealthIndicator } from './health/database.health';
import { HealthController } from './health/health.controller';
import { MetricsController } from './metrics/metrics.controller';
import { ShortenerMetrics } from './metrics/shortener-metrics';
import { SHORTENER_CONFIG, URL_REPOSITORY } from './shortener.constants';
import { ShortenerService } from './urls/shortener.service';
import { UrlResolver } from './urls/url-resolver';
import { UrlsController } from './urls/urls.controller';

/** Closes the database pool (or file) when the app closes. */
@Injectable()
export class DatabaseLifecycle implements OnApplicationShutdown {
  constructor(@Inject(URL_REPOSITORY) private readonly repo: UrlRepository) {}

  async onApplicationShutdown(): Promise<void> {
    await this.repo.close();
  }
}

@Module({})
export class ShortenerModule {
  static forRoot(config: ShortenerConfig): DynamicModule {
    return {
      module: ShortenerModule,
      imports: [
        TerminusModule.forRoot({ logger: false }),
        StampedeHealthModule,
        StampedeModule.forRoot({
          // Without the cache the module still runs (in-memory store), but nothing calls it.
          redis: config.cacheEnabled ? config.redisUrl : undefined,
          keyPrefix: config.redisKeyPrefix,
          defaultTtl: config.cacheTtlMs,
          operationTimeout: config.redisOperationTimeoutMs,
          cooldown: config.redisCooldownMs,
          connectTimeout: config.redisConnectTimeoutMs,
        }),
      ],
      controllers: [HealthController, MetricsController, UrlsController],
      providers: [
        { provide: SHORTENER_CONFIG, useValue: config },
        {
          provide: URL_REPOSITORY,
          useFactory: async () => {
            const repo = new GuardedUrlRepository(
              createUrlRepository(config.databaseUrl, config.databaseTable, config.dbPoolSize),
            );
            try {
              await repo.init();
            } catch (err) {
              await repo.close().catch(() => undefined);
              throw err;
            }
            return repo;
          },
        },
        DatabaseLifecycle,
        DatabaseHealthIndicator,
        ShortenerMetrics,
        UrlResolver,
        ShortenerService,
      ],
      exports: [ShortenerService, ShortenerMetrics, URL_REPOSITORY],
    };
  }
}
