import { Cluster, type RedisOptions, ReplyError } from 'ioredis';
import {
  isRedisClient,
  type RedisClient,
  type RedisConnection,
  redisClientOf,
} from '@nest-redis-resilience/common';
import { StoreUnavailableError } from '../core/errors';

export { isRedisClient, type RedisClient, type RedisConnection };

/** Options for the clients this store creates itself: fail fast rather than queue while Redis is down. */
const OWNED_CLIENT_DEFAULTS: RedisOptions = {
  maxRetriesPerRequest: 1,
  enableOfflineQueue: true,
  connectTimeout: 2000,
  retryStrategy: (times) => Math.min(times * 100, 2000),
  // ioredis waits this long for a socket that never connected to close (default 2000 ms): it
  // kept app.close() and the process 2 s longer while Redis refused connections.
  disconnectTimeout: 500,
};

/** The client of `connection`, and whether this store made it (and so closes it): a given client is the app's. */
export function clientOf(connection: RedisConnection): { client: RedisClient; owned: boolean } {
  const made = redisClientOf(connection, { defaults: OWNED_CLIENT_DEFAULTS });
  // Errors surface on each call; without a listener ioredis would print every reconnect attempt.
  if (made.owned) made.client.on('error', () => undefined);
  return made;
}

/** The connection's publish/subscribe verbs: sharded pub/sub on a Cluster keeps a key's notifications on its shard. */
export interface PubSubVerbs {
  publish: 'publish' | 'spublish';
  subscribe: 'subscribe' | 'ssubscribe';
  unsubscribe: 'unsubscribe' | 'sunsubscribe';
  message: 'message' | 'smessage';
}

const PLAIN_PUBSUB: PubSubVerbs = {
  publish: 'publish',
  subscribe: 'subscribe',
  unsubscribe: 'unsubscribe',
  message: 'message',
};
const SHARDED_PUBSUB: PubSubVerbs = {
  publish: 'spublish',
  subscribe: 'ssubscribe',
  unsubscribe: 'sunsubscribe',
  message: 'smessage',
};

/** The subscriber connection (sharded subscribers on a Cluster) and the verbs to use on it. */
export function subscriberOf(client: RedisClient): {
  subscriber: RedisClient;
  pubsub: PubSubVerbs;
} {
  const subscriber =
    client instanceof Cluster
      ? client.duplicate(undefined, { shardedSubscribers: true })
      : client.duplicate();
  subscriber.on('error', () => undefined);
  return { subscriber, pubsub: client instanceof Cluster ? SHARDED_PUBSUB : PLAIN_PUBSUB };
}

export async function quit(client: RedisClient): Promise<void> {
  try {
    if (client.status === 'end') return;
    if (client.status === 'ready') await client.quit();
    else client.disconnect();
  } catch {
    client.disconnect();
  }
}

/** Resolves true once `clients` are ready and `also` resolved, or false after `timeoutMs`. */
export function whenReady(
  clients: RedisClient[],
  also: Promise<void>,
  timeoutMs: number,
): Promise<boolean> {
  // A client created with lazyConnect waits for its first command; a store needs it connected.
  for (const c of clients) if (c.status === 'wait') c.connect().catch(() => undefined);
  const ready = (c: RedisClient) =>
    c.status === 'ready'
      ? Promise.resolve()
      : new Promise<void>((resolve) => c.once('ready', () => resolve()));
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
    timer.unref();
  });
  return Promise.race([
    Promise.all([...clients.map(ready), also]).then(() => true),
    timedOut,
  ]).finally(() => clearTimeout(timer));
}

/** An error reply means Redis refused the command; any other failure leaves it unknown. */
export function toStoreError(err: unknown): unknown {
  return err instanceof StoreUnavailableError
    ? err
    : new StoreUnavailableError(messageOf(err), err, !(err instanceof ReplyError));
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
