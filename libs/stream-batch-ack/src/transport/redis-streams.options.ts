import type { Deserializer, Serializer } from '@nestjs/microservices';
import type { BackoffOptions } from '../core/backoff';
import type { TransportIdempotencyOptions } from '../idempotency/idempotency.options';
import type { PartitionsOption } from '../partitions/partition-layout';
import type { RedisStreamsConnection } from '../redis/connection';
import type { EventEmitterLike } from '../telemetry/redis-streams.telemetry-events';

export interface RedisStreamsServerOptions {
  /**
   * A redis:// URL or ioredis options (two connections: a blocking reader and one for commands),
   * or `{ cluster: nodes }` for a Redis Cluster (one blocking reader per hash slot of the streams).
   */
  connection: RedisStreamsConnection;
  /** Consumer group, created (with MKSTREAM) on every handled stream if missing. */
  group: string;
  /**
   * The stream a handler's pattern reads, when it is not the pattern itself: with
   * `{ ticks: config.ticksStream }`, `@StreamEventPattern('ticks')` reads the stream that the
   * configuration names (a decorator's argument is fixed when the class is defined). The other
   * options (`partitions`, `deadLetter.stream`) and the context (`ctx.getStream()`) name the
   * stream, not the pattern. Default: every pattern is its stream.
   */
  streams?: Record<string, string>;
  /** Consumer name inside the group. Default `${hostname}-${pid}`. */
  consumer?: string;
  /** Where a newly created group starts: '0' (the whole stream, default) or '$' (new entries only). */
  startId?: string;
  read?: { count?: number; blockMs?: number };
  ack?: { batchSize?: number; intervalMs?: number; maxPending?: number; backoff?: BackoffOptions };
  /** Taking over the pending entries of dead consumers (XPENDING IDLE + XCLAIM). */
  claim?: { minIdleMs?: number; intervalMs?: number; count?: number };
  /**
   * When a failed entry is tried again, by this consumer: exponential backoff with jitter after
   * each failed delivery (default 1 s, 2 s, 4 s ... at most 15 s, +-20 %). `maxMs` must stay below
   * `claim.minIdleMs`, or other consumers would take the entry over while it waits.
   */
  retry?: BackoffOptions;
  deadLetter?: { maxDeliveries?: number; stream?: (stream: string) => string; maxLen?: number };
  /**
   * Duplicate filtering by the transport, per read batch: an in-process LRU (L1), and with
   * `store: 'redis'` one script call per batch to Redis (L2). Applies to every handler of this
   * server; `@Idempotent()` sets a handler's key or TTLs (and turns it on for that handler when
   * this option is absent, with the memory store).
   */
  idempotency?: TransportIdempotencyOptions;
  /** Entries whose handler runs at the same time (counted per entry for batch handlers). Default 1000. */
  concurrency?: number;
  /** How long close() waits for running handlers, then for the last acks. Default 10_000. */
  shutdownTimeoutMs?: number;
  /** Nest serializer of replies (request-reply) and deserializer of incoming messages. */
  serializer?: Serializer;
  deserializer?: Deserializer;
  /**
   * The namespace of the reply streams (request-reply), the same as the clients'. Default
   * `'sba:reply:'`. The server replies only into `<replyPrefix>{<uuid v4>}` streams that a client
   * created; a request naming any other `replyTo` is dead-lettered as malformed. Set it to a
   * prefix your Redis ACL user may write (`'app:reply:'` for `~app:*`).
   */
  replyPrefix?: string;
  /**
   * Partitioned streams: logical stream -> partition count (`{ ticks: 4 }`). A handler of the
   * logical stream (`@EventPattern('ticks')`) consumes all its partitions (`ticks:{<tag>}`) in
   * one group; the count must match the producers' (checked at start-up). See README, "Partitioned streams".
   */
  partitions?: PartitionsOption;
  /**
   * Partitioned streams only. `'key'` (default): each partition has one owner among the group's
   * live consumers (a lease in Redis), which handles each key's entries (the producer's partition
   * key) in order and one at a time, a failed entry holding back the later ones of its key.
   * `'none'`: any consumer reads any partition, and no order is kept across consumers. See
   * README, "Ordered partitions".
   */
  ordering?: 'key' | 'none';
  /**
   * How long a partition's lease lasts without renewal (`ordering: 'key'`). Renewed every third
   * of it; the partitions of a consumer that died move after at most twice this. Default 5000.
   */
  leaseMs?: number;
  /**
   * OpenTelemetry (with `@opentelemetry/api` installed and an SDK registered before `listen()`):
   * the lag and pending gauges read `XINFO GROUPS` when collected, at most every
   * `groupInfoIntervalMs` (default 5000).
   */
  telemetry?: { groupInfoIntervalMs?: number };
  /**
   * Also emit the events of `server.events` here: the app's EventEmitter2
   * (`app.get(EventEmitter2)` with `EventEmitterModule.forRoot()`), for `@OnEvent()` handlers.
   * When the app is created after the server, call `server.events.forwardTo(...)` instead.
   */
  eventEmitter?: EventEmitterLike;
}

export interface ResolvedServerOptions {
  connection: RedisStreamsConnection;
  group: string;
  /** Pattern -> stream, for the patterns that do not name their stream. */
  streams: ReadonlyMap<string, string>;
  consumer: string;
  startId: string;
  read: { count: number; blockMs: number };
  ack: { batchSize: number; intervalMs: number; maxPending: number; backoff?: BackoffOptions };
  claim: { minIdleMs: number; intervalMs: number; count: number };
  retry: Required<BackoffOptions>;
  deadLetter: { maxDeliveries: number; stream: (stream: string) => string; maxLen: number };
  idempotency: TransportIdempotencyOptions | undefined;
  concurrency: number;
  shutdownTimeoutMs: number;
  replyPrefix: string;
  /** Logical stream -> partition count. */
  partitions: ReadonlyMap<string, number>;
  ordering: 'key' | 'none';
  leaseMs: number;
  telemetry: { groupInfoIntervalMs: number };
}

export interface RedisStreamsClientOptions {
  /** A redis:// URL, ioredis options, or `{ cluster: nodes }`. Commands of one tick go out as one pipeline. */
  connection: RedisStreamsConnection;
  /**
   * Keep streams near this length. Trimming uses MINID computed from the groups' state, so it
   * never deletes an entry that a group has not acknowledged: a lagging group makes the stream longer.
   */
  maxLen?: number;
  /** Run the trim after this many emits to a stream. Default max(1, floor(maxLen / 10)). */
  trimEvery?: number;
  /** How long `send()` waits for a reply, in ms. Default 30_000. */
  replyTimeoutMs?: number;
  /**
   * The namespace of this client's reply stream, `<replyPrefix>{<uuid v4>}`: the same as the
   * servers'. Default `'sba:reply:'`. Set it to a prefix your Redis ACL user may write.
   */
  replyPrefix?: string;
  /**
   * Partitioned streams: logical stream -> partition count (`{ ticks: 4 }`), the same as the
   * consumers'. `emit('ticks', data)` appends to the partition of the message's key.
   */
  partitions?: PartitionsOption;
  /**
   * The partition key of a message to a partitioned stream, when its `RedisStreamsRecord` gives
   * none (e.g. `(stream, tick) => tick.symbol`). Messages with the same key go to the same
   * partition, in order. No key (undefined): the partitions take turns, and order is not kept.
   */
  partitionKey?: (stream: string, data: unknown) => string | undefined;
  /** Nest serializer of outgoing messages and deserializer of replies. */
  serializer?: Serializer;
  deserializer?: Deserializer;
}
