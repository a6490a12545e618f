export { AckBatcher, type AckBatcherOptions, type AckFlushFn } from './core/ack-batcher';
export { type BackoffOptions, backoffDelay } from './core/backoff';
export { type Clock, ManualClock, systemClock } from './core/clock';
export {
  DATA_FIELD,
  decodeEntry,
  encodePayload,
  fieldsToObject,
  type DecodedEntry,
} from './core/entry-codec';
export {
  AckFlushError,
  MalformedEntryError,
  MaxDeliveriesExceededError,
  NotInitializedError,
  NotSupportedError,
  StreamBatchAckError,
} from './core/errors';
export { LruCache, type LruCacheOptions } from './core/lru-cache';
export { defaultDeadLetterStream } from './redis/keys';
export { ClientRedisStreams } from './transport/client-redis-streams';
export { RedisStreamsContext } from './transport/redis-streams.context';
export {
  type RedisStreamsConnectionType,
  type RedisStreamsEvents,
  RedisStreamsEventsMap,
  RedisStreamsStatus,
} from './transport/redis-streams.events';
export {
  type RedisStreamsClientOptions,
  type RedisStreamsClusterConnection,
  type RedisStreamsServerOptions,
} from './transport/redis-streams.options';
export { REDIS_STREAMS_TRANSPORT, ServerRedisStreams } from './transport/server-redis-streams';
export { IdempotencyInterceptor } from './nest/idempotency.interceptor';
export {
  type IdempotencyOptions,
  type IdempotencyState,
  IdempotencyStore,
} from './nest/idempotency.store';
export { Idempotent, type IdempotentOptions } from './nest/idempotent.decorator';
export { RedisStreamsErrorInterceptor } from './nest/redis-streams-error.interceptor';
export { IDEMPOTENT_METADATA } from './nest/redis-streams.constants';
export { RedisStreamsModule, type RedisStreamsModuleOptions } from './nest/redis-streams.module';
