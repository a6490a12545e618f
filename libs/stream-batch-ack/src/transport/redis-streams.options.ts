import type { ClusterNode, ClusterOptions, RedisOptions } from 'ioredis';
import type { BackoffOptions } from '../core/backoff';

/** A Redis Cluster: its seed nodes and ioredis Cluster options. */
export interface RedisStreamsClusterConnection {
  cluster: ClusterNode[];
  clusterOptions?: ClusterOptions;
}

export interface RedisStreamsServerOptions {
  /**
   * A redis:// URL or ioredis options (two connections: a blocking reader and one for commands),
   * or `{ cluster: nodes }` for a Redis Cluster (one blocking reader per hash slot of the streams).
   */
  connection: string | RedisOptions | RedisStreamsClusterConnection;
  /** Consumer group, created (with MKSTREAM) on every handled stream if missing. */
  group: string;
  /** Consumer name inside the group. Default `${hostname}-${pid}`. */
  consumer?: string;
  /** Where a newly created group starts: '0' (the whole stream, default) or '$' (new entries only). */
  startId?: string;
  read?: { count?: number; blockMs?: number };
  ack?: { batchSize?: number; intervalMs?: number; maxPending?: number; backoff?: BackoffOptions };
  claim?: { minIdleMs?: number; intervalMs?: number; count?: number };
  deadLetter?: { maxDeliveries?: number; stream?: (stream: string) => string; maxLen?: number };
  /** Messages whose handler runs at the same time. Default 1000. */
  concurrency?: number;
  /** How long close() waits for running handlers, then for the last acks. Default 10_000. */
  shutdownTimeoutMs?: number;
}

export interface ResolvedServerOptions {
  connection: string | RedisOptions | RedisStreamsClusterConnection;
  group: string;
  consumer: string;
  startId: string;
  read: { count: number; blockMs: number };
  ack: { batchSize: number; intervalMs: number; maxPending: number; backoff?: BackoffOptions };
  claim: { minIdleMs: number; intervalMs: number; count: number };
  deadLetter: { maxDeliveries: number; stream: (stream: string) => string; maxLen: number };
  concurrency: number;
  shutdownTimeoutMs: number;
}

export interface RedisStreamsClientOptions {
  /** A redis:// URL or ioredis options. Commands issued in the same tick are sent as one pipeline. */
  connection: string | RedisOptions;
  /**
   * Keep streams near this length. Trimming uses MINID computed from the groups' state, so it
   * never deletes an entry that a group has not acknowledged: a lagging group makes the stream longer.
   */
  maxLen?: number;
  /** Run the trim after this many emits to a stream. Default max(1, floor(maxLen / 10)). */
  trimEvery?: number;
}
