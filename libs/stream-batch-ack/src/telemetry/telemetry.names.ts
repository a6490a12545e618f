/**
 * Names of the instruments, attributes and events. `messaging.*` follow the OpenTelemetry
 * messaging semantic conventions; what they do not cover lives under `redis_streams.`.
 */

export const ATTR_SYSTEM = 'messaging.system';
export const ATTR_DESTINATION = 'messaging.destination.name';
export const ATTR_GROUP = 'messaging.consumer.group.name';
export const ATTR_OPERATION_NAME = 'messaging.operation.name';
export const ATTR_OPERATION_TYPE = 'messaging.operation.type';
export const ATTR_MESSAGE_ID = 'messaging.message.id';
export const ATTR_BATCH_COUNT = 'messaging.batch.message_count';
export const ATTR_ERROR_TYPE = 'error.type';
/** `true` on the duration of a batch handler's call, `false` for a per-message handler. */
export const ATTR_BATCH = 'redis_streams.batch';
/** Where a duplicate was caught: `memory` (L1) or `redis` (L2). */
export const ATTR_LAYER = 'redis_streams.idempotency.layer';
/** Why an entry was dead-lettered: `malformed`, `max-deliveries` or `handler-failed`. */
export const ATTR_DEAD_LETTER_REASON = 'redis_streams.dead_letter.reason';
/** How many times the entry was delivered, this delivery included. */
export const ATTR_DELIVERIES = 'redis_streams.message.deliveries';
/** Entries of a batch that the handler failed with `ctx.fail(id)`. */
export const ATTR_BATCH_FAILED = 'redis_streams.batch.failed_count';

export const SYSTEM = 'redis';

export const METRIC = {
  consumed: 'messaging.client.consumed.messages',
  processDuration: 'messaging.process.duration',
  sent: 'messaging.client.sent.messages',
  failed: 'redis_streams.messages.failed',
  retried: 'redis_streams.messages.retried',
  deadLettered: 'redis_streams.messages.dead_lettered',
  duplicatesSkipped: 'redis_streams.messages.duplicates_skipped',
  inProgressSkipped: 'redis_streams.messages.in_progress_skipped',
  inFlight: 'redis_streams.messages.in_flight',
  xackCalls: 'redis_streams.xack.calls',
  xackFailures: 'redis_streams.xack.failures',
  xackIds: 'redis_streams.xack.ids',
  claimRuns: 'redis_streams.claim.runs',
  claimEntries: 'redis_streams.claim.entries',
  groupPending: 'redis_streams.group.pending',
  groupLag: 'redis_streams.group.lag',
  partitionAssignments: 'redis_streams.partition.assignments',
  partitionReleases: 'redis_streams.partition.releases',
  partitionLeaseLosses: 'redis_streams.partition.lease_losses',
} as const;

/** Buckets of `messaging.process.duration`, seconds (the semantic conventions' advice). */
export const DURATION_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
];
/** Buckets of `redis_streams.xack.ids`. */
export const XACK_IDS_BUCKETS = [1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000];
