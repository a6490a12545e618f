import { DynamicModule, Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { TerminusModule } from '@nestjs/terminus';
import { StampedeHealthModule } from '@nest-redis-resilience/stampede/health';
import { StampedeModule } from '@nest-redis-resilience/stampede';
import {
  bindNamespaces,
  cacheConfig,
  type CacheConfig,
  databaseConfig,
  type DatabaseConfig,
} from './config';
import type { ShortenerConfig } from './config';
import { GuardedUrlRepository } from './db/guarded-url-repository';
import { createUrlRepository } from './db/repository.factory';
import type { UrlRepository } from './db/url-repository';
import { DatabaseHealthIndicator } from './health/database.health';
import { HealthController } from './health/health.controller';
import { MetricsController } from './metrics/metrics.controller';
import { ShortenerMetrics } from './metrics/shortener-metrics';
import { URL_REPOSITORY } from './shortener.constants';
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
  /** The app, configured by `config` (parsed from the environment by createShortenerApp). */
  static forRoot(config: ShortenerConfig): DynamicModule {
    return {
      module: ShortenerModule,
      imports: [
        ConfigModule.forRoot({ isGlobal: true, ignoreEnvFile: true, load: bindNamespaces(config) }),
        TerminusModule.forRoot({ logger: false }),
        StampedeHealthModule,
        StampedeModule.forRootAsync({
          inject: [cacheConfig.KEY],
          useFactory: (cache: CacheConfig) => ({
            // Without the cache the module still runs (in-memory store), but nothing calls it.
            redis: cache.enabled ? cache.redisUrl : undefined,
            keyPrefix: cache.keyPrefix,
            defaultTtl: cache.ttlMs,
            operationTimeout: cache.operationTimeoutMs,
            cooldown: cache.cooldownMs,
            connectTimeout: cache.connectTimeoutMs,
          }),
        }),
      ],
      controllers: [HealthController, MetricsController, UrlsController],
      providers: [
        {
          provide: URL_REPOSITORY,
          inject: [databaseConfig.KEY],
          useFactory: async (database: DatabaseConfig) => {
            const repo = new GuardedUrlRepository(createUrlRepository(database), {
              // A backstop for what the drivers' own timeouts do not cover (a stalled network).
              deadlineMs: database.connectTimeoutMs + database.statementTimeoutMs + 1000,
            });
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
