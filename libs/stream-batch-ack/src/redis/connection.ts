import { Cluster, Redis, type RedisOptions } from 'ioredis';
import {
  closeRedisClient,
  isClusterConnection,
  isClusterTarget,
  type RedisClient,
  type RedisClusterConnection,
  type RedisConnection,
  redisClientOf,
} from '@nest-redis-resilience/common';

/** A Redis Cluster: its seed nodes and ioredis Cluster options. */
export type RedisStreamsClusterConnection = RedisClusterConnection;

/** A redis:// URL, ioredis options, `{ cluster: nodes, clusterOptions? }`, or an ioredis client. */
export type RedisStreamsConnection = RedisConnection;

export { isClusterConnection, isClusterTarget };

/**
 * RESP2 is forced: the stream commands are parsed in their RESP2 shape (ioredis 6 defaults to
 * RESP3). `disconnectTimeout` defaults to 500 ms so that a client closed while Redis is
 * unreachable does not hold the process for ioredis' default 2 s.
 */
function settings(overrides: RedisOptions) {
  return {
    defaults: { disconnectTimeout: 500 },
    overrides: { ...overrides, protocol: 2 } as RedisOptions,
  };
}

/**
 * A connection of the transport's own, with `overrides` on top (on a Cluster, `retryStrategy`
 * becomes its `clusterRetryStrategy`, the rest applies to every node). A given client is
 * duplicated: the transport needs connections of its own (blocking reads, RESP2) and closes
 * them; the given client stays open, the app's to close.
 */
export function createStreamsClient(
  connection: RedisStreamsConnection,
  overrides: RedisOptions,
): RedisClient {
  return redisClientOf(connection, { ...settings(overrides), givenClient: 'duplicate' }).client;
}

/** A single-node client from a redis:// URL (the DLQ command line). */
export function createRedisClient(url: string, overrides: RedisOptions): Redis {
  return createStreamsClient(url, overrides) as Redis;
}

/**
 * The idempotency store's connection: a given client is used as it is and left open; otherwise
 * a new client, which the caller closes (`owned`).
 */
export function idempotencyClientOf(connection: RedisStreamsConnection): {
  client: RedisClient;
  owned: boolean;
} {
  return redisClientOf(connection, settings({}));
}

/** The retry strategy the user gave, if any: the transport keeps it until it closes. */
export function userRetryStrategy(
  connection: RedisStreamsConnection,
): ((times: number) => number | void | null) | undefined {
  if (connection instanceof Cluster) return connection.options.clusterRetryStrategy ?? undefined;
  if (isClusterConnection(connection))
    return connection.clusterOptions?.clusterRetryStrategy ?? undefined;
  if (connection instanceof Redis) return connection.options.retryStrategy ?? undefined;
  if (typeof connection === 'object') return connection.retryStrategy ?? undefined;
  return undefined;
}

/** QUIT when connected (pending replies arrive first), otherwise drop the connection and stop reconnecting. */
export const closeClient = closeRedisClient;
