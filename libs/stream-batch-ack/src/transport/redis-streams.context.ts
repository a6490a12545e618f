import { BaseRpcContext } from '@nestjs/microservices';
import type { Headers } from '../core/entry-codec';
import type { StreamPartition } from '../partitions/partition-layout';

/** The L2 idempotency record of an entry and the in-progress token, for an atomic effect (IDEMPOTENT_EFFECT_LUA). */
export interface IdempotencyHandle {
  /** Redis key of the record. */
  record: string;
  /** The token the record holds while this delivery runs. */
  token: string;
  /** How long the done mark is kept, in ms. */
  ttlMs: number;
}

/** [stream, id, group, deliveries, consumer, fields, headers, idempotency, partition] */
export type RedisStreamsContextArgs = [
  string,
  string,
  string,
  number,
  string,
  Record<string, string>,
  Headers?,
  IdempotencyHandle?,
  StreamPartition?,
];

/** Keeps the original error of a failed handler (Nest's RPC exception filter replaces unknown errors). */
abstract class ErrorCarrier<T extends unknown[]> extends BaseRpcContext<T> {
  private failure: { error: unknown } | undefined;

  /**
   * Records the original error of a failed handler, before Nest's exception filter replaces it
   * (the default RPC filter turns unknown errors into "Internal server error"). Done by
   * RedisStreamsErrorInterceptor; the dead-letter entry shows it.
   */
  setError(error: unknown): void {
    this.failure = { error };
  }
  getError(): unknown {
    return this.failure?.error;
  }
  hasError(): boolean {
    return this.failure !== undefined;
  }
}

const NO_HEADERS: Headers = Object.freeze({});

/**
 * The context of one stream entry, injected with `@Ctx()`. The transport acknowledges the entry
 * after the handler succeeded; `skipAck()` leaves it pending instead (it is delivered again after
 * `claim.minIdleMs`).
 */
export class RedisStreamsContext extends ErrorCarrier<RedisStreamsContextArgs> {
  private ackSkipped = false;

  constructor(args: RedisStreamsContextArgs) {
    super(args);
  }

  /** The stream key: the pattern of the handler, or for a partitioned stream the partition's stream (`ticks:{2}`). */
  get stream(): string {
    return this.args[0];
  }
  /** The pattern of the handler: the logical stream (`ticks`) of a partitioned stream, else `stream`. */
  get logicalStream(): string {
    return this.args[8]?.logicalStream ?? this.args[0];
  }
  /** The partition index (0 .. partitions-1), or undefined when the stream is not partitioned. */
  get partition(): number | undefined {
    return this.args[8]?.partition;
  }
  /** The partition count of the logical stream, or undefined when it is not partitioned. */
  get partitions(): number | undefined {
    return this.args[8]?.partitions;
  }
  /** The entry id, e.g. `1700000000000-0`. */
  get id(): string {
    return this.args[1];
  }
  get group(): string {
    return this.args[2];
  }
  /** How many times this entry was delivered to the group, this delivery included (1 = first). */
  get deliveries(): number {
    return this.args[3];
  }
  get consumer(): string {
    return this.args[4];
  }
  /** The raw fields of the entry. */
  get fields(): Record<string, string> {
    return this.args[5];
  }
  /** The message's headers (e.g. `traceparent`); empty when it has none. */
  get headers(): Headers {
    return this.args[6] ?? NO_HEADERS;
  }
  /** Set when the handler is idempotent with the Redis store. */
  get idempotency(): IdempotencyHandle | undefined {
    return this.args[7];
  }

  getStream(): string {
    return this.stream;
  }
  getLogicalStream(): string {
    return this.logicalStream;
  }
  getPartition(): number | undefined {
    return this.partition;
  }
  getId(): string {
    return this.id;
  }
  getGroup(): string {
    return this.group;
  }
  getDeliveries(): number {
    return this.deliveries;
  }
  getConsumer(): string {
    return this.consumer;
  }
  getFields(): Record<string, string> {
    return this.fields;
  }
  getHeaders(): Headers {
    return this.headers;
  }
  /**
   * The packet metadata of the message (NestJS 12: what the producer's dispatch hook,
   * `client.setOnDispatchHook()`, put in `packet.metadata`), as `RedisContext#getMetadata()` of
   * Nest's Redis transport. It travels in the entry's headers, so this is `headers`: metadata and
   * the record's headers in one map (a header set explicitly wins over metadata of its name,
   * `traceparent` included). Empty when the entry has none.
   */
  getMetadata(): Headers {
    return this.headers;
  }

  /** Leave this entry pending (not acknowledged, not dead-lettered) even if the handler succeeds. */
  skipAck(): void {
    this.ackSkipped = true;
  }
  isAckSkipped(): boolean {
    return this.ackSkipped;
  }
}

/** One entry of a batch, in the order of the payloads. */
export interface RedisStreamsBatchEntry {
  id: string;
  /** 1 = first delivery. */
  deliveries: number;
  /** The entry's headers: its packet metadata too (`ctx.getMetadata(id)` returns them). */
  headers: Headers;
  /** The raw fields of the entry. */
  fields: Record<string, string>;
  /** The L2 idempotency record of the entry (idempotent handler, Redis store). */
  idempotencyRecord?: string;
}

/** [stream, group, consumer, entries, idempotency token and ttl, partition] */
export type RedisStreamsBatchContextArgs = [
  string,
  string,
  string,
  RedisStreamsBatchEntry[],
  { token: string; ttlMs: number }?,
  StreamPartition?,
];

/**
 * The context of a batch handler (`@EventPattern(stream, { batch: true })`), injected with
 * `@Ctx()`. When the handler returns, every entry is acknowledged except those passed to
 * `fail(id, error)`, which are retried with backoff (and dead-lettered after
 * `deadLetter.maxDeliveries`). A thrown error fails the whole batch.
 */
export class RedisStreamsBatchContext extends ErrorCarrier<RedisStreamsBatchContextArgs> {
  private readonly failed = new Map<string, unknown>();

  constructor(args: RedisStreamsBatchContextArgs) {
    super(args);
  }

  /** The stream key: the pattern of the handler, or for a partitioned stream the partition's stream (`ticks:{2}`). */
  get stream(): string {
    return this.args[0];
  }
  /** The pattern of the handler: the logical stream (`ticks`) of a partitioned stream, else `stream`. */
  get logicalStream(): string {
    return this.args[5]?.logicalStream ?? this.args[0];
  }
  /** The partition index (0 .. partitions-1) of every entry of the batch, or undefined when not partitioned. */
  get partition(): number | undefined {
    return this.args[5]?.partition;
  }
  /** The partition count of the logical stream, or undefined when it is not partitioned. */
  get partitions(): number | undefined {
    return this.args[5]?.partitions;
  }
  getStream(): string {
    return this.stream;
  }
  getLogicalStream(): string {
    return this.logicalStream;
  }
  getPartition(): number | undefined {
    return this.partition;
  }
  get group(): string {
    return this.args[1];
  }
  get consumer(): string {
    return this.args[2];
  }
  /** The entries, in the order of the payloads. */
  get entries(): readonly RedisStreamsBatchEntry[] {
    return this.args[3];
  }
  /** The in-progress token and the done TTL of this batch's idempotency records (Redis store). */
  get idempotency(): { token: string; ttlMs: number } | undefined {
    return this.args[4];
  }

  /**
   * Packet metadata (NestJS 12, `client.setOnDispatchHook()`; see `RedisStreamsContext#getMetadata`).
   * With an entry id: that entry's metadata, which is its `headers` (an unknown id throws, as
   * `fail()` does). Without: what the batch's entries share, the names whose value is the same on
   * every entry (a tenant, a deployment), and empty when they share none.
   */
  getMetadata(id?: string): Headers {
    const { entries } = this;
    if (id !== undefined) {
      const entry = entries.find((e) => e.id === id);
      if (!entry)
        throw new Error(
          `getMetadata(${id}): no entry with this id in the batch of "${this.stream}"`,
        );
      return entry.headers;
    }
    if (entries.length === 0) return NO_HEADERS;
    let shared: Record<string, string> | undefined;
    for (const [name, value] of Object.entries(entries[0].headers))
      if (entries.every((e) => e.headers[name] === value)) (shared ??= {})[name] = value;
    return shared ?? NO_HEADERS;
  }

  /** Marks one entry failed: it is not acknowledged, and is retried on its own. */
  fail(id: string, error: unknown = new Error('failed by the handler')): void {
    if (!this.entries.some((e) => e.id === id))
      throw new Error(`fail(${id}): no entry with this id in the batch of "${this.stream}"`);
    this.failed.set(id, error);
  }

  /** The entries failed so far, with their errors. */
  get failures(): ReadonlyMap<string, unknown> {
    return this.failed;
  }
}
