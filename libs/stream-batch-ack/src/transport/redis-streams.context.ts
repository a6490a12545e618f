import { BaseRpcContext } from '@nestjs/microservices';
import type { Headers } from '../core/entry-codec';
import { StreamBatchAckError } from '../core/errors';
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
 * The context of one stream entry, injected with `@Ctx()`, read with `getX()` methods like Nest's
 * `RmqContext` and `RedisContext`. The transport acknowledges the entry after the handler
 * succeeded; `skipAck()` leaves it pending instead (it is delivered again after `claim.minIdleMs`).
 */
export class RedisStreamsContext extends ErrorCarrier<RedisStreamsContextArgs> {
  private ackSkipped = false;

  constructor(args: RedisStreamsContextArgs) {
    super(args);
  }

  /** The stream key: the handler's stream (its pattern, or the option `streams` maps it), or for a partitioned stream the partition's stream (`ticks:{2}`). */
  getStream(): string {
    return this.args[0];
  }
  /** The logical stream (`ticks`) of a partitioned stream, else `getStream()`. */
  getLogicalStream(): string {
    return this.args[8]?.logicalStream ?? this.args[0];
  }
  /** The partition index (0 .. partitions-1), or undefined when the stream is not partitioned. */
  getPartition(): number | undefined {
    return this.args[8]?.partition;
  }
  /** The partition count of the logical stream, or undefined when it is not partitioned. */
  getPartitions(): number | undefined {
    return this.args[8]?.partitions;
  }
  /** The entry id, e.g. `1700000000000-0`. */
  getId(): string {
    return this.args[1];
  }
  getGroup(): string {
    return this.args[2];
  }
  /** How many times this entry was delivered to the group, this delivery included (1 = first). */
  getDeliveries(): number {
    return this.args[3];
  }
  getConsumer(): string {
    return this.args[4];
  }
  /** The raw fields of the entry. */
  getFields(): Record<string, string> {
    return this.args[5];
  }
  /** The message's headers (e.g. `traceparent`); empty when it has none. */
  getHeaders(): Headers {
    return this.args[6] ?? NO_HEADERS;
  }
  /** Set when the handler is idempotent with the Redis store. */
  getIdempotency(): IdempotencyHandle | undefined {
    return this.args[7];
  }
  /**
   * The packet metadata of the message (NestJS 12: what the producer's dispatch hook,
   * `client.setOnDispatchHook()`, put in `packet.metadata`), as `RedisContext#getMetadata()` of
   * Nest's Redis transport. It travels in the entry's headers, so this is `getHeaders()`: metadata
   * and the record's headers in one map (a header set explicitly wins over metadata of its name,
   * `traceparent` included). Empty when the entry has none.
   */
  getMetadata(): Headers {
    return this.getHeaders();
  }

  /** Leave this entry pending (not acknowledged, not dead-lettered) even if the handler succeeds. */
  skipAck(): void {
    this.ackSkipped = true;
  }
  isAckSkipped(): boolean {
    return this.ackSkipped;
  }

  /** @deprecated Use `getStream()`. */
  get stream(): string {
    return this.getStream();
  }
  /** @deprecated Use `getLogicalStream()`. */
  get logicalStream(): string {
    return this.getLogicalStream();
  }
  /** @deprecated Use `getPartition()`. */
  get partition(): number | undefined {
    return this.getPartition();
  }
  /** @deprecated Use `getPartitions()`. */
  get partitions(): number | undefined {
    return this.getPartitions();
  }
  /** @deprecated Use `getId()`. */
  get id(): string {
    return this.getId();
  }
  /** @deprecated Use `getGroup()`. */
  get group(): string {
    return this.getGroup();
  }
  /** @deprecated Use `getDeliveries()`. */
  get deliveries(): number {
    return this.getDeliveries();
  }
  /** @deprecated Use `getConsumer()`. */
  get consumer(): string {
    return this.getConsumer();
  }
  /** @deprecated Use `getFields()`. */
  get fields(): Record<string, string> {
    return this.getFields();
  }
  /** @deprecated Use `getHeaders()`. */
  get headers(): Headers {
    return this.getHeaders();
  }
  /** @deprecated Use `getIdempotency()`. */
  get idempotency(): IdempotencyHandle | undefined {
    return this.getIdempotency();
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
 * `@Ctx()`, read with `getX()` methods. When the handler returns, every entry is acknowledged
 * except those passed to `fail(id, error)`, which are retried with backoff (and dead-lettered
 * after `deadLetter.maxDeliveries`). A thrown error fails the whole batch.
 */
export class RedisStreamsBatchContext extends ErrorCarrier<RedisStreamsBatchContextArgs> {
  private readonly failed = new Map<string, unknown>();

  constructor(args: RedisStreamsBatchContextArgs) {
    super(args);
  }

  /** The stream key: the handler's stream (its pattern, or the option `streams` maps it), or for a partitioned stream the partition's stream (`ticks:{2}`). */
  getStream(): string {
    return this.args[0];
  }
  /** The logical stream (`ticks`) of a partitioned stream, else `getStream()`. */
  getLogicalStream(): string {
    return this.args[5]?.logicalStream ?? this.args[0];
  }
  /** The partition index (0 .. partitions-1) of every entry of the batch, or undefined when not partitioned. */
  getPartition(): number | undefined {
    return this.args[5]?.partition;
  }
  /** The partition count of the logical stream, or undefined when it is not partitioned. */
  getPartitions(): number | undefined {
    return this.args[5]?.partitions;
  }
  getGroup(): string {
    return this.args[1];
  }
  getConsumer(): string {
    return this.args[2];
  }
  /** The entries, in the order of the payloads. */
  getEntries(): readonly RedisStreamsBatchEntry[] {
    return this.args[3];
  }
  /** The in-progress token and the done TTL of this batch's idempotency records (Redis store). */
  getIdempotency(): { token: string; ttlMs: number } | undefined {
    return this.args[4];
  }

  /**
   * Packet metadata (NestJS 12, `client.setOnDispatchHook()`; see `RedisStreamsContext#getMetadata`).
   * With an entry id: that entry's metadata, which is its `headers` (an unknown id throws, as
   * `fail()` does). Without: what the batch's entries share, the names whose value is the same on
   * every entry (a tenant, a deployment), and empty when they share none.
   */
  getMetadata(id?: string): Headers {
    const entries = this.getEntries();
    if (id !== undefined) {
      const entry = entries.find((e) => e.id === id);
      if (!entry)
        throw new StreamBatchAckError(
          'INVALID_ARGUMENT',
          `getMetadata(${id}): no entry with this id in the batch of "${this.getStream()}"`,
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
    if (!this.getEntries().some((e) => e.id === id))
      throw new StreamBatchAckError(
        'INVALID_ARGUMENT',
        `fail(${id}): no entry with this id in the batch of "${this.getStream()}"`,
      );
    this.failed.set(id, error);
  }

  /** The entries failed so far, with their errors. */
  getFailures(): ReadonlyMap<string, unknown> {
    return this.failed;
  }

  /** @deprecated Use `getStream()`. */
  get stream(): string {
    return this.getStream();
  }
  /** @deprecated Use `getLogicalStream()`. */
  get logicalStream(): string {
    return this.getLogicalStream();
  }
  /** @deprecated Use `getPartition()`. */
  get partition(): number | undefined {
    return this.getPartition();
  }
  /** @deprecated Use `getPartitions()`. */
  get partitions(): number | undefined {
    return this.getPartitions();
  }
  /** @deprecated Use `getGroup()`. */
  get group(): string {
    return this.getGroup();
  }
  /** @deprecated Use `getConsumer()`. */
  get consumer(): string {
    return this.getConsumer();
  }
  /** @deprecated Use `getEntries()`. */
  get entries(): readonly RedisStreamsBatchEntry[] {
    return this.getEntries();
  }
  /** @deprecated Use `getIdempotency()`. */
  get idempotency(): { token: string; ttlMs: number } | undefined {
    return this.getIdempotency();
  }
  /** @deprecated Use `getFailures()`. */
  get failures(): ReadonlyMap<string, unknown> {
    return this.getFailures();
  }
}
