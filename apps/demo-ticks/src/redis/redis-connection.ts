import { Logger } from '@nestjs/common';
import { Cluster, Redis, RedisOptions } from 'ioredis';
import type { RedisStreamsConnection } from '@nest-redis-resilience/stream-batch-ack';
import type { RedisSettings } from '../config/ticks-env.schema';

/** A single Redis or a Redis Cluster: the candle store and the HTTP reads use either. */
export type TicksRedis = Redis | Cluster;

/** The credentials and TLS of REDIS_URL, applied to every node of a Cluster. */
function nodeOptions(url: string): RedisOptions {
  const parsed = new URL(url);
  return {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/** The transport's `connection`: REDIS_URL, or `{ cluster }` with REDIS_CLUSTER_NODES. */
export function transportConnection(redis: RedisSettings): RedisStreamsConnection {
  if (!redis.clusterNodes) return redis.url;
  return { cluster: redis.clusterNodes, clusterOptions: { redisOptions: nodeOptions(redis.url) } };
}

/** The app's own connection (candles, HTTP reads, health): a Redis, or a Cluster client. */
export function createTicksRedis(redis: RedisSettings, connectionName: string): TicksRedis {
  const client = !redis.clusterNodes
    ? new Redis(redis.url, { maxRetriesPerRequest: 2, connectionName, disconnectTimeout: 500 })
    : new Cluster(redis.clusterNodes, {
        redisOptions: {
          ...nodeOptions(redis.url),
          maxRetriesPerRequest: 2,
          connectionName,
          disconnectTimeout: 500,
        },
        clusterRetryStrategy: (times) => Math.min(times * 100, 2000),
      });
  // One line per outage, not one per reconnection attempt (ioredis retries by itself; /health
  // reports the outage).
  const logger = new Logger('TicksRedis');
  let reported = false;
  client.on('error', (err: Error) => {
    if (reported) return;
    reported = true;
    logger.warn(`Redis connection error: ${err.message} (retrying; /health says down meanwhile)`);
  });
  client.on('ready', () => (reported = false));
  return client;
}
