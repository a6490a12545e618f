import type { Cluster, Redis } from 'ioredis';
import { StreamBatchAckError } from '../core/errors';
import { partitionCountKey } from './partition-layout';

/**
 * The partition count configured here does not match the one stored for the logical stream (by
 * the first producer or consumer), or a partitioned stream is used without a `partitions` entry.
 */
export class PartitionCountMismatchError extends StreamBatchAckError {
  constructor(
    /** The logical stream. */
    readonly stream: string,
    /** The metadata key, `<stream>:partitions`. */
    readonly key: string,
    /** The count stored in the key (a string when it is not a number). */
    readonly stored: number | string,
    /** The count configured here; undefined: no `partitions` entry for the stream. */
    readonly configured: number | undefined,
    side: 'server' | 'client',
  ) {
    super(
      'PARTITION_MISMATCH',
      configured === undefined
        ? `Stream "${stream}" is partitioned into ${stored} partitions ("${key}" = ${stored}), but this ${side} has no partitions entry for it, so it would use the unpartitioned stream "${stream}" that nobody reads. ` +
            `Add partitions: { '${stream}': ${stored} } to the ${side} options.`
        : `Stream "${stream}" has ${stored} partitions ("${key}" = ${JSON.stringify(String(stored))}, stored by the first producer or consumer), but this ${side} is configured with partitions['${stream}'] = ${configured}. ` +
            `A key's partition depends on the count: mixing counts breaks the order per key and leaves partitions unread. ` +
            `Configure ${stored}, or change the count with "drain and switch" (README, "Changing N").`,
    );
  }
}

/**
 * Records each partitioned stream's count in `<stream>:partitions` (SET NX: the first producer or
 * consumer defines it) and refuses a different one; refuses a stream used without partitions
 * whose key exists.
 */
export async function checkPartitionCounts(
  redis: Redis | Cluster,
  streams: Iterable<string>,
  counts: ReadonlyMap<string, number>,
  side: 'server' | 'client',
): Promise<void> {
  await Promise.all(
    [...new Set(streams)].map(async (stream) => {
      const key = partitionCountKey(stream);
      const configured = counts.get(stream);
      if (configured !== undefined) {
        const set = await redis.set(key, String(configured), 'NX');
        if (set === 'OK') return;
      }
      const stored = await redis.get(key);
      if (stored === null) {
        // Deleted between the SET and the GET (a drain and switch): try once more.
        if (configured !== undefined && (await redis.set(key, String(configured), 'NX')) !== 'OK')
          throw new StreamBatchAckError(
            'PARTITION_MISMATCH',
            `"${key}" changed while being checked; start again.`,
          );
        return;
      }
      if (configured !== undefined && stored === String(configured)) return;
      const n = Number(stored);
      throw new PartitionCountMismatchError(
        stream,
        key,
        Number.isInteger(n) && String(n) === stored ? n : stored,
        configured,
        side,
      );
    }),
  );
}
