/** Metadata key of @Idempotent() (also kept in the handler's pattern extras). */
export const IDEMPOTENT_METADATA = 'stream-batch-ack:idempotent';
