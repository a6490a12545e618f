export { AckBatcher, type AckBatcherOptions, type AckFlushFn } from './core/ack-batcher';
export { type BackoffOptions, backoffDelay } from './core/backoff';
export { type Clock, ManualClock, systemClock } from '@nest-redis-resilience/common';
export {
  DATA_FIELD,
  HEADERS_FIELD,
  decodeEntry,
  encodePayload,
  fieldsToObject,
  type DecodedEntry,
  type Headers,
} from './core/entry-codec';
export {
  AckFlushError,
  MalformedEntryError,
  MaxDeliveriesExceededError,
  NotInitializedError,
  NotSupportedError,
  RequestTimeoutError,
  StreamBatchAckConfigError,
  StreamBatchAckError,
} from './core/errors';
export { LruCache, type LruCacheOptions } from '@nest-redis-resilience/common';
export {
  type DeadLetter,
  deadLetterFields,
  type DeadLetterReason,
  type DeadLetterSource,
  isStreamId,
  missingDeadLetterFields,
  parseDeadLetter,
} from './dead-letter/dead-letter-entry';
export {
  DeadLetterError,
  DeadLetters,
  type DeadLettersOptions,
  type ListDeadLettersOptions,
  REPLAY_DEAD_LETTER_LUA,
  type ReplayOptions,
  type ReplayResult,
} from './dead-letter/dead-letters';
export { IDEMPOTENT_EFFECT_LUA } from './idempotency/idempotency-scripts';
export type {
  IdempotentOptions,
  TransportIdempotencyOptions,
} from './idempotency/idempotency.options';
export {
  IdempotencyStore,
  type BeginResult,
  type IdempotencyState,
  type IdempotencyStoreOptions,
} from './idempotency/idempotency.store';
export { fnv1a32, partitionOf } from './core/partition-hash';
export {
  MAX_PARTITIONS,
  partitionCountKey,
  partitionStream,
  partitionStreams,
  partitionTags,
  type PartitionsOption,
  type StreamPartition,
} from './partitions/partition-layout';
export { PartitionCountMismatchError } from './partitions/partition-metadata';
export type { PartitionGroupStats, StreamGroupStats } from './partitions/partition-stats';
export { defaultDeadLetterStream } from './redis/keys';
export { ClientRedisStreams } from './transport/client-redis-streams';
export {
  RedisStreamsBatchContext,
  RedisStreamsContext,
  type IdempotencyHandle,
  type RedisStreamsBatchEntry,
} from './transport/redis-streams.context';
export {
  type RedisStreamsConnectionType,
  type RedisStreamsEvents,
  RedisStreamsEventsMap,
  RedisStreamsStatus,
} from './redis/redis-streams.events';
export type { RedisStreamsClusterConnection, RedisStreamsConnection } from './redis/connection';
export type { RedisClusterConnection, RedisConnection } from '@nest-redis-resilience/common';
export {
  type RedisStreamsClientOptions,
  type RedisStreamsServerOptions,
} from './transport/redis-streams.options';
export {
  RedisStreamsRecord,
  type RedisStreamsRecordOptions,
} from './transport/redis-streams.record';
export type { RedisStreamsServerMetrics } from './telemetry/server-metrics';
export {
  type GroupRecreation,
  REDIS_STREAMS_TRANSPORT,
  ServerRedisStreams,
} from './transport/server-redis-streams';
export {
  type AckFlushFailedEvent,
  type AckFlushRecoveredEvent,
  type ClaimEvent,
  type DeadLetteredEvent,
  type EventEmitterLike,
  type GroupRecreatedEvent,
  RedisStreamsEventBus,
  type RedisStreamsTelemetryEventName,
  type RedisStreamsTelemetryEvents,
} from './telemetry/redis-streams.telemetry-events';
export { METRIC as REDIS_STREAMS_METRICS } from './telemetry/telemetry.names';
export { Idempotent } from './nest/idempotent.decorator';
export {
  StreamEventPattern,
  type StreamEventPatternOptions,
} from './nest/stream-event-pattern.decorator';
export { RedisStreamsErrorInterceptor } from './nest/redis-streams-error.interceptor';
export { IDEMPOTENT_METADATA } from './nest/redis-streams.constants';
export { RedisStreamsModule } from './nest/redis-streams.module';
export { RedisStreamsServerModule } from './nest/redis-streams-server.module';
export {
  REDIS_STREAMS_MODULE_OPTIONS,
  type RedisStreamsModuleOptions,
} from './nest/redis-streams.module-definition';
