import { Cluster, type ClusterNode, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';

/** A Redis Cluster: its seed nodes and ioredis Cluster options. */
export interface RedisClusterConnection {
  cluster: ClusterNode[];
  clusterOptions?: ClusterOptions;
}

/**
 * Where Redis is: a redis:// URL, ioredis options, `{ cluster: nodes, clusterOptions? }`, or an
 * ioredis client (`Redis` or `Cluster`) that the app created and closes.
 */
export type RedisConnection = string | RedisOptions | RedisClusterConnection | Redis | Cluster;

export type RedisClient = Redis | Cluster;

export function isRedisClient(value: unknown): value is RedisClient {
  return value instanceof Redis || value instanceof Cluster;
}

export function isClusterConnection(value: unknown): value is RedisClusterConnection {
  return (
    typeof value === 'object' &&
    value !== null &&
    !isRedisClient(value) &&
    Array.isArray((value as { cluster?: unknown }).cluster)
  );
}

/** True when `connection` leads to a Redis Cluster (its nodes, or a Cluster client). */
export function isClusterTarget(connection: RedisConnection): boolean {
  return connection instanceof Cluster || isClusterConnection(connection);
}

export interface RedisClientSettings {
  /** Options under the user's (on a Cluster, under `redisOptions`). */
  defaults?: RedisOptions;
  /** Options over the user's (on a Cluster, over `redisOptions`). */
  overrides?: RedisOptions;
  /**
   * What to do with a client given as the connection: `'share'` (default) uses it as it is;
   * `'duplicate'` opens a new connection with its options and `overrides` (`client.duplicate()`),
   * which the caller owns. The given client itself is never closed by the caller.
   */
  givenClient?: 'share' | 'duplicate';
}

/**
 * Options that a Cluster takes for itself rather than per node: `retryStrategy` becomes its
 * `clusterRetryStrategy`; `lazyConnect` and `enableOfflineQueue` keep their names.
 */
function splitForCluster(options: RedisOptions): {
  cluster: ClusterOptions;
  nodes: RedisOptions;
} {
  const { retryStrategy, lazyConnect, enableOfflineQueue, ...nodes } = options;
  const cluster: ClusterOptions = {};
  if (retryStrategy) cluster.clusterRetryStrategy = (times) => retryStrategy(times) ?? null;
  if (lazyConnect !== undefined) cluster.lazyConnect = lazyConnect;
  if (enableOfflineQueue !== undefined) cluster.enableOfflineQueue = enableOfflineQueue;
  return { cluster, nodes };
}

/**
 * The ioredis client of `connection`, and whether the caller made it (and so closes it): a URL,
 * options or Cluster nodes give a new client with `defaults` under and `overrides` over the
 * user's options; a given client is shared or duplicated as `settings.givenClient` says.
 */
export function redisClientOf(
  connection: RedisConnection,
  settings: RedisClientSettings = {},
): { client: RedisClient; owned: boolean } {
  const defaults = settings.defaults ?? {};
  const overrides = settings.overrides ?? {};
  if (isRedisClient(connection)) {
    if (settings.givenClient !== 'duplicate') return { client: connection, owned: false };
    if (connection instanceof Redis)
      return { client: connection.duplicate(overrides), owned: true };
    const { cluster, nodes } = splitForCluster(overrides);
    const client = connection.duplicate(undefined, {
      ...cluster,
      redisOptions: { ...connection.options.redisOptions, ...nodes },
    } as ClusterOptions);
    return { client, owned: true };
  }
  if (isClusterConnection(connection)) {
    const under = splitForCluster(defaults);
    const over = splitForCluster(overrides);
    const user = connection.clusterOptions ?? {};
    const client = new Cluster(connection.cluster, {
      ...under.cluster,
      ...user,
      ...over.cluster,
      redisOptions: { ...under.nodes, ...user.redisOptions, ...over.nodes },
    } as ClusterOptions);
    return { client, owned: true };
  }
  const client =
    typeof connection === 'string'
      ? new Redis(connection, { ...defaults, ...overrides })
      : new Redis({ ...defaults, ...connection, ...overrides });
  return { client, owned: true };
}

/** QUIT when connected (pending replies arrive first), otherwise drop the connection and stop reconnecting. */
export async function closeRedisClient(client: RedisClient | null | undefined): Promise<void> {
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
