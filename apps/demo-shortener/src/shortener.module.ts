import { DynamicModule, Module } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { TerminusModule } from '@nestjs/terminus';
import type { Cluster } from 'ioredis';
import { StampedeHealthModule } from '@nest-redis-resilience/stampede/health';
import { StampedeModule } from '@nest-redis-resilience/stampede';
import { bindNamespaces, cacheConfig, type CacheConfig, type ShortenerConfig } from './config';
import { DatabaseModule } from './db/database.module';
import type { UrlRepository } from './db/url-repository';
import { DatabaseHealthIndicator } from './health/database.health';
import { HealthController } from './health/health.controller';
import { ShortenerMetricsModule } from './metrics/metrics.module';
import { PageApiController } from './page/page-api.controller';
import { PageController } from './page/page.controller';
import { CACHE_REDIS, URL_REPOSITORY } from './shortener.constants';
import { CacheConnectionModule } from './urls/cache-connection';
import { cacheKeyPrefix } from './urls/cache-keys';
import { RedirectCounts } from './urls/redirect-counts';
import { ShortenerService } from './urls/shortener.service';
import { UrlResolver } from './urls/url-resolver';
import { UrlsController } from './urls/urls.controller';

@Module({})
export class ShortenerModule {
  /** The app, configured by `config` (parsed from the environment by createShortenerApp). */
  static forRoot(config: ShortenerConfig): DynamicModule {
    return {
      module: ShortenerModule,
      imports: [
        ConfigModule.forRoot({ isGlobal: true, ignoreEnvFile: true, load: bindNamespaces(config) }),
        ShortenerMetricsModule.forRoot(),
        DatabaseModule,
        TerminusModule.forRoot({ logger: false }),
        StampedeHealthModule,
        StampedeModule.forRootAsync({
          imports: [DatabaseModule, CacheConnectionModule],
          inject: [cacheConfig.KEY, URL_REPOSITORY, CACHE_REDIS],
          useFactory: (cache: CacheConfig, repo: UrlRepository, redis?: string | Cluster) => ({
            // Without the cache the module still runs (in-memory store), but nothing calls it.
            redis,
            // Shared: the app only reads the records it gets, so an L1 hit decodes nothing.
            l1: cache.l1Entries > 0 ? { maxEntries: cache.l1Entries, shared: true } : undefined,
            keyPrefix: cacheKeyPrefix(cache.keyPrefix, repo.databaseId),
            defaultTtl: cache.ttlMs,
            operationTimeout: cache.operationTimeoutMs,
            cooldown: cache.cooldownMs,
            connectTimeout: cache.connectTimeoutMs,
          }),
        }),
      ],
      controllers: [HealthController, PageController, PageApiController, UrlsController],
      providers: [DatabaseHealthIndicator, UrlResolver, ShortenerService, RedirectCounts],
      exports: [ShortenerService],
    };
  }
}
