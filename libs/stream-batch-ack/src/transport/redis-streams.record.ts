import type { Headers } from '../core/entry-codec';

/** Per-message options of a RedisStreamsRecord. */
export interface RedisStreamsRecordOptions {
  /**
   * The partition key, for a stream with partitions (e.g. the symbol of a tick): messages with
   * the same key go to the same partition, in order. Overrides the client's `partitionKey`.
   */
  partitionKey?: string;
}

/**
 * A message with headers: `client.emit(stream, new RedisStreamsRecord(data, { traceparent }))`.
 * The consumer reads them from `ctx.getHeaders()`. The third argument sets the partition key:
 * `new RedisStreamsRecord(tick, {}, { partitionKey: tick.symbol })`.
 */
export class RedisStreamsRecord<T = unknown> {
  constructor(
    readonly data: T,
    readonly headers: Headers = {},
    readonly options: RedisStreamsRecordOptions = {},
  ) {}
}
