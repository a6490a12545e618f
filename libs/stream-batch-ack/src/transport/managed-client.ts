import type { Logger } from '@nestjs/common';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import {
  RedisStreamsConnectionType,
  RedisStreamsEvents,
  RedisStreamsEventsMap,
  RedisStreamsStatus,
} from '../redis/redis-streams.events';
import {
  createStreamsClient,
  type RedisStreamsConnection,
  userRetryStrategy,
} from '../redis/connection';

export type EventListener = {
  event: keyof RedisStreamsEvents;
  callback: (...args: any[]) => void;
};

export interface ManagedClientHooks {
  type: RedisStreamsConnectionType;
  logger: Logger;
  /** True once the owner is closing: no more reconnects, no more error logs. */
  isClosed: () => boolean;
  /** Status changes, for the owner's `status` observable. */
  onStatus: (status: RedisStreamsStatus, client: Redis | Cluster) => void;
  /** Listeners registered with `on()` before the client existed. */
  listeners?: readonly EventListener[];
}

/**
 * One ioredis client (a single node or a Cluster) as both the server and the client use it, of
 * their own (a given client is duplicated): lazy connect, the user's retry strategy until the owner closes, errors logged, status reported.
 */
export function createManagedClient(
  connection: RedisStreamsConnection,
  overrides: RedisOptions,
  hooks: ManagedClientHooks,
): Redis | Cluster {
  const userRetry = userRetryStrategy(connection);
  const options: RedisOptions = {
    ...overrides,
    lazyConnect: true,
    retryStrategy: (times: number) => {
      if (hooks.isClosed()) return null;
      return userRetry ? userRetry(times) : Math.min(times * 50, 2000);
    },
  };
  const client = createStreamsClient(connection, options);
  client.on(RedisStreamsEventsMap.ERROR, (err: Error) => {
    if (!hooks.isClosed()) hooks.logger.error(`Redis ${hooks.type} connection: ${err.message}`);
  });
  client.on(RedisStreamsEventsMap.RECONNECTING, () => {
    if (!hooks.isClosed()) hooks.onStatus(RedisStreamsStatus.RECONNECTING, client);
  });
  client.on(RedisStreamsEventsMap.READY, () =>
    hooks.onStatus(RedisStreamsStatus.CONNECTED, client),
  );
  client.on(RedisStreamsEventsMap.END, () =>
    hooks.onStatus(RedisStreamsStatus.DISCONNECTED, client),
  );
  for (const { event, callback } of hooks.listeners ?? [])
    client.on(event, (...args: unknown[]) => callback(hooks.type, ...args));
  return client;
}
