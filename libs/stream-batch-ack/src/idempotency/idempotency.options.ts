import type { RedisConnection } from '@nest-redis-resilience/common';

export interface TransportIdempotencyOptions {
  /**
   * 'memory' (default): an in-process LRU only, so duplicates are caught within one consumer.
   * 'redis': the LRU (L1) and Redis (L2), shared by every consumer of the group.
   */
  store?: 'memory' | 'redis';
  /**
   * L2 connection: a redis:// URL, ioredis options, `{ cluster: nodes, clusterOptions? }`, or a
   * client the app owns and closes (used as it is). Default: the server's own command connection.
   */
  redis?: RedisConnection;
  /** Prefix of the L2 records. Default 'sba:idem:'. Put a hash tag in it (`'sba:idem:{ticks}:'`) to keep the records of a Cluster in the slot of your effect's keys. */
  keyPrefix?: string;
  /** How long a processed key is remembered, in ms. Default 60_000. */
  ttlMs?: number;
  /** How long an in-progress key blocks other consumers if its consumer dies, in ms (L2). Default 30_000. */
  lockMs?: number;
  /** L1 size bound (entries). Default 100_000. */
  maxSize?: number;
}

/** What a handler's `@Idempotent()` sets. */
export interface IdempotentOptions {
  /**
   * The idempotency key of a message. Default: the (physical) stream and the entry id. A key of
   * your own is shared by all partitions of a partitioned stream (`ctx.getLogicalStream()`, `ctx.getPartition()`).
   */
  key?: (
    data: any,
    ctx: {
      stream: string;
      id: string;
      headers: Record<string, string>;
      logicalStream?: string;
      partition?: number;
    },
  ) => string;
  /** How long a processed key is remembered, in ms. Default: the server's `idempotency.ttlMs`. */
  ttlMs?: number;
  /** How long a key stays in progress if its consumer dies (L2), in ms. Default: the server's `idempotency.lockMs`. */
  lockMs?: number;
}
