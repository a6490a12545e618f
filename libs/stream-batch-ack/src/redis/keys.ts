import { keySlot } from '@nest-redis-resilience/common';

/** Default dead-letter stream of a stream. */
export const defaultDeadLetterStream = (stream: string): string => `${stream}:dlq`;

/** Key of the L2 idempotency record of `key` (one per group, so that two groups each process a message once). */
export const idempotencyKey = (prefix: string, group: string, key: string): string =>
  `${prefix}${group}:${key}`;

/** Default prefix of idempotency records. */
export const DEFAULT_IDEMPOTENCY_PREFIX = 'sba:idem:';

/**
 * The consumer group that marks a reply stream as made by a ClientRedisStreams, which creates it
 * before its first request: a server replies only into a stream that has it.
 */
export const REPLY_STREAM_MARKER = 'sba-reply';

/** How long a reply stream outlives its last reply, or a client's last request plus its timeout. */
export const REPLY_STREAM_IDLE_TTL_MS = 60_000;

export { keySlot };

/**
 * Splits streams into the groups that one `XREADGROUP` call can read. A single Redis reads all of
 * them in one call; on a Cluster one call may only name keys of one hash slot, so there is one
 * group per slot (streams that share a hash tag, like `{ticks}:btc` and `{ticks}:eth`, share one).
 */
export function groupStreamsForReading(streams: readonly string[], cluster: boolean): string[][] {
  if (streams.length === 0) return [];
  if (!cluster) return [[...streams]];
  const bySlot = new Map<number, string[]>();
  for (const stream of streams) {
    const slot = keySlot(stream);
    const group = bySlot.get(slot);
    if (group) group.push(stream);
    else bySlot.set(slot, [stream]);
  }
  return [...bySlot.values()];
}
