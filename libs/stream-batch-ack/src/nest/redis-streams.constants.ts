/** Metadata key of @Idempotent(). */
export const IDEMPOTENT_METADATA = 'stream-batch-ack:idempotent';
/** Injection token of the RedisStreamsModule options. */
export const REDIS_STREAMS_MODULE_OPTIONS = 'stream-batch-ack:module-options';
