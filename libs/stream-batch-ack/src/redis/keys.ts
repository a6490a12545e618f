/** Default dead-letter stream of a stream. */
export const defaultDeadLetterStream = (stream: string): string => `${stream}:dlq`;

/** Key of the L2 idempotency record of `key` (one per group, so that two groups each process a message once). */
export const idempotencyKey = (prefix: string, group: string, key: string): string =>
  `${prefix}${group}:${key}`;

/** Default prefix of idempotency records. */
export const DEFAULT_IDEMPOTENCY_PREFIX = 'sba:idem:';
