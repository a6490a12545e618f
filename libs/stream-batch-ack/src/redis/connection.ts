import { Redis, RedisOptions } from 'ioredis';

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
export async function closeClient(client: Redis | null | undefined): Promise<void> {
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
