import { Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { Cluster, RedisOptions } from 'ioredis';
import { cacheConfig, type CacheConfig } from '../config';
import { redactCredentials } from '../logging/redacting-logger';
import { CACHE_REDIS } from '../shortener.constants';

/**
 * The cache's Redis: the REDIS_URL string (the stampede store opens and closes that connection
 * itself), or, with REDIS_CLUSTER_NODES, a Cluster client made here and closed at shutdown by
 * CacheConnectionModule (the store does not close a client it was given). The credentials and
 * TLS of REDIS_URL apply to every node of the Cluster.
 */
export function cacheConnection(cache: CacheConfig): string | Cluster {
  if (!cache.clusterNodes) return cache.redisUrl;
  const url = new URL(cache.redisUrl);
  const node: RedisOptions = {
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
  };
  const cluster = new Cluster(cache.clusterNodes, {
    redisOptions: node,
    clusterRetryStrategy: (times) => Math.min(times * 100, 2000),
    // A moved slot (failover, resharding) is followed at once; a refresh every 5 s otherwise.
    slotsRefreshInterval: 5000,
  });
  // Errors surface on each call (the store falls back to the database); no unhandled 'error'.
  cluster.on('error', () => undefined);
  return cluster;
}

/** How the cache connection is named in logs: the URL without credentials, or the Cluster's seed nodes. */
export function describeCacheConnection(cache: CacheConfig): string {
  return cache.clusterNodes
    ? `Redis Cluster ${cache.clusterNodes.map((n) => `${n.host}:${n.port}`).join(',')}`
    : redactCredentials(cache.redisUrl);
}

@Injectable()
class CacheConnectionCloser implements OnApplicationShutdown {
  constructor(@Inject(CACHE_REDIS) private readonly connection: string | Cluster | undefined) {}

  async onApplicationShutdown(): Promise<void> {
    if (!(this.connection instanceof Cluster)) return;
    try {
      await this.connection.quit();
    } catch {
      this.connection.disconnect();
    }
  }
}

/** Provides CACHE_REDIS (undefined when CACHE_ENABLED=false) and closes a Cluster client at shutdown. */
@Module({
  providers: [
    {
      provide: CACHE_REDIS,
      inject: [cacheConfig.KEY],
      useFactory: (cache: CacheConfig) => (cache.enabled ? cacheConnection(cache) : undefined),
    },
    CacheConnectionCloser,
  ],
  exports: [CACHE_REDIS],
})
export class CacheConnectionModule {}
