import { EventPattern } from '@nestjs/microservices';

/** What a stream handler can ask of the transport besides its stream. */
export interface StreamEventPatternOptions {
  /** The handler takes the whole read batch (`RedisStreamsBatchContext`), not one message. */
  batch?: boolean;
}

/**
 * `@EventPattern(stream, options)` for this transport: the pattern is the stream key. It accepts
 * any handler signature on NestJS 11 and 12 alike: Nest 12's typed `@EventPattern` overload
 * rejects a handler whose payload or `@Ctx()` parameter has a type of its own (TS1241) unless
 * given a type argument, which this decorator supplies.
 */
export function StreamEventPattern(
  stream: string,
  options: StreamEventPatternOptions = {},
): MethodDecorator {
  if (typeof stream !== 'string' || stream === '') {
    throw new TypeError(`@StreamEventPattern(stream): stream must be a non-empty string`);
  }
  return EventPattern<string>(stream, { ...options });
}
