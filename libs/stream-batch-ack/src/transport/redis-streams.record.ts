import type { Headers } from '../core/entry-codec';

/**
 * A message with headers: `client.emit(stream, new RedisStreamsRecord(data, { traceparent }))`.
 * The consumer reads them from `ctx.headers`.
 */
export class RedisStreamsRecord<T = unknown> {
  constructor(
    readonly data: T,
    readonly headers: Headers = {},
  ) {}
}
