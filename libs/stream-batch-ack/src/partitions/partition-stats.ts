import type { Cluster, Redis } from 'ioredis';

/** The consumer group's state on one physical stream (one partition), from `XINFO GROUPS`. */
export interface PartitionGroupStats {
  /** Partition index (0 for a stream that is not partitioned). */
  partition: number;
  /** The physical stream. */
  stream: string;
  /** False when the group does not exist on this stream (the other numbers are then 0). */
  exists: boolean;
  consumers: number;
  /** Delivered, not acknowledged. */
  pending: number;
  /** Not delivered yet (Redis 7+; null when Redis cannot tell, e.g. after XDEL, or before 7.0). */
  lag: number | null;
  lastDeliveredId: string;
}

/** A logical stream's group state: each partition, and the sums. */
export interface StreamGroupStats {
  /** The logical stream. */
  stream: string;
  group: string;
  /** Sum over the partitions. */
  pending: number;
  /** Sum over the partitions; null when the lag of one of them is unknown. */
  lag: number | null;
  /** The most consumers seen on one partition. */
  consumers: number;
  /** One per partition, partition 0 first (one entry for a stream that is not partitioned). */
  partitions: PartitionGroupStats[];
}

/** Reads `XINFO GROUPS` of each physical stream of `logical` (one call per partition, in parallel). */
export async function readGroupStats(
  redis: Redis | Cluster,
  logical: string,
  streams: readonly string[],
  group: string,
): Promise<StreamGroupStats> {
  const partitions = await Promise.all(
    streams.map(async (stream, partition): Promise<PartitionGroupStats> => {
      const groups = (await redis.call('XINFO', 'GROUPS', stream)) as unknown[][];
      const info = groups.map(toRecord).find((g) => g.name === group);
      if (!info)
        return {
          partition,
          stream,
          exists: false,
          consumers: 0,
          pending: 0,
          lag: null,
          lastDeliveredId: '',
        };
      return {
        partition,
        stream,
        exists: true,
        consumers: Number(info.consumers ?? 0),
        pending: Number(info.pending ?? 0),
        lag: info.lag === null || info.lag === undefined ? null : Number(info.lag),
        lastDeliveredId: String(info['last-delivered-id'] ?? ''),
      };
    }),
  );
  let lag: number | null = 0;
  for (const p of partitions) lag = lag === null || p.lag === null ? null : lag + p.lag;
  return {
    stream: logical,
    group,
    pending: partitions.reduce((sum, p) => sum + p.pending, 0),
    lag,
    consumers: Math.max(0, ...partitions.map((p) => p.consumers)),
    partitions,
  };
}

function toRecord(flat: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = flat[i + 1];
  return out;
}
