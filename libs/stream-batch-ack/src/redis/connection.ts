import { Cluster, type ClusterNode, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';

/** A Redis Cluster: its seed nodes and ioredis Cluster options. */
export interface RedisStreamsClusterConnection {
  cluster: ClusterNode[];
  clusterOptions?: ClusterOptions;
}

export type RedisStreamsConnection = string | RedisOptions | RedisStreamsClusterConnection;

/**
 * Builds an ioredis client from `string | RedisOptions`, with our overrides on top. RESP2 is
 * forced: the stream commands are parsed in their RESP2 shape (ioredis 6 defaults to RESP3).
 * `disconnectTimeout` defaults to 500 ms so that a client closed while Redis is unreachable
 * does not hold the process for ioredis' default 2 s.
 */
export function createRedisClient(
  connection: string | RedisOptions,
  overrides: RedisOptions,
): Redis {
  const userOptions = typeof connection === 'string' ? {} : connection;
  const options: RedisOptions = {
    disconnectTimeout: userOptions.disconnectTimeout ?? 500,
    ...overrides,
    protocol: 2,
  } as RedisOptions;
  return typeof connection === 'string'
    ? new Redis(connection, options)
    : new Redis({ ...connection, ...options });
}

/** QUIT when connected (pending replies arrive first), otherwise drop the connection and stop reconnecting. */
export async function closeClient(client: Redis | Cluster | null | undefined): Promise<void> {
  if (!client || client.status === 'end') return;
  if (client.status === 'ready') {
    try {
      await client.quit();
      return;
    } catch {
      // fall through
    }
  }
  client.disconnect();
}

export function isClusterConnection(
  connection: string | RedisOptions | RedisStreamsClusterConnection,
): connection is RedisStreamsClusterConnection {
  return (
    typeof connection === 'object' && Array.isArray((connection as { cluster?: unknown }).cluster)
  );
}

/**
 * Builds an ioredis Cluster client: `overrides.retryStrategy` becomes the cluster's
 * `clusterRetryStrategy`, the other overrides apply to every node connection (RESP2 forced).
 */
export function createClusterClient(
  connection: RedisStreamsClusterConnection,
  overrides: RedisOptions,
): Cluster {
  const { retryStrategy, lazyConnect, ...nodeOverrides } = overrides;
  const user = connection.clusterOptions ?? {};
  return new Cluster(connection.cluster, {
    ...user,
    lazyConnect: lazyConnect ?? user.lazyConnect,
    clusterRetryStrategy: retryStrategy
      ? (times: number) => retryStrategy(times) ?? null
      : user.clusterRetryStrategy,
    redisOptions: {
      disconnectTimeout: 500,
      ...user.redisOptions,
      ...nodeOverrides,
      protocol: 2,
    } as RedisOptions,
  });
}
