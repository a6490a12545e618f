import { partitionOf } from '../core/partition-hash';
import { StreamBatchAckConfigError } from '../core/errors';
import { keySlot } from '../redis/keys';
import { failValue } from '../transport/option-checks';
import { checkPlainObject } from '@nest-redis-resilience/common';

/** The most partitions a logical stream may have (each is a stream, and a blocking reader on a Cluster). */
export const MAX_PARTITIONS = 1024;
const SLOTS = 16384;

/** `partitions` option of the server and the client: logical stream -> partition count. */
export type PartitionsOption = Record<string, number | { count: number }>;

/** Where an entry of a partitioned stream lives; `ctx.getPartition()` of a handler. */
export interface StreamPartition {
  /** The logical stream: the handler's pattern, e.g. `ticks`. */
  logicalStream: string;
  /** The partition index, 0 .. partitions-1. */
  partition: number;
  /** How many partitions the logical stream has. */
  partitions: number;
  /** The physical stream of this partition, e.g. `ticks:{2}`. */
  stream: string;
}

const tagCache = new Map<number, string[]>();

/**
 * The hash tags of the partitions of a stream split `count` ways. Partition `i` owns the slot range
 * `[floor(i * 16384 / count), floor((i + 1) * 16384 / count))`; its tag is the first of `i`,
 * `i.1`, `i.2`, ... whose Cluster hash slot (CRC16 % 16384) falls in that range. So the partitions
 * of a stream sit in distinct slots spread evenly over the slot space, and thus over the masters
 * of a Cluster sharded the default way (equal slot ranges); the result only depends on
 * `(i, count)`, never on the Cluster.
 */
export function partitionTags(count: number): readonly string[] {
  let tags = tagCache.get(count);
  if (tags) return tags;
  checkCount('partitions', count);
  tags = [];
  for (let i = 0; i < count; i++) {
    const from = Math.floor((i * SLOTS) / count);
    const to = Math.floor(((i + 1) * SLOTS) / count);
    for (let k = 0; ; k++) {
      const tag = k === 0 ? String(i) : `${i}.${k}`;
      const slot = keySlot(tag);
      if (slot >= from && slot < to) {
        tags.push(tag);
        break;
      }
    }
  }
  tagCache.set(count, tags);
  return tags;
}

/** The physical stream of partition `index` of `logical` split `count` ways: `<logical>:{<tag>}`. */
export function partitionStream(logical: string, index: number, count: number): string {
  return `${logical}:{${partitionTags(count)[index]}}`;
}

/** The physical streams of `logical` split `count` ways, partition 0 first. */
export function partitionStreams(logical: string, count: number): string[] {
  return partitionTags(count).map((tag) => `${logical}:{${tag}}`);
}

/** The key holding a logical stream's partition count, written by the first producer or consumer. */
export function partitionCountKey(logical: string): string {
  return `${logical}:partitions`;
}

/**
 * Validates the `partitions` option: positive whole counts up to MAX_PARTITIONS, stream names
 * without `{` or `}` (a hash tag in the logical name would put every partition in its slot).
 */
export function resolvePartitions(
  value: PartitionsOption | undefined,
  option = 'partitions',
): Map<string, number> {
  const out = new Map<string, number>();
  if (value === undefined) return out;
  checkPlainObject(
    option,
    value,
    failValue,
    () =>
      `expected an object { [logicalStream]: count }, e.g. { ticks: 4 }, got ${JSON.stringify(value)}`,
  );
  for (const [stream, spec] of Object.entries(value)) {
    const name = `${option}.${stream}`;
    if (stream === '' || /[{}]/.test(stream))
      throw new StreamBatchAckConfigError(
        name,
        'a partitioned stream name may not be empty or contain "{" or "}": the partitions get hash tags of their own (<stream>:{<tag>}), and a tag in the name would put them all in one Cluster slot.',
      );
    const count = typeof spec === 'object' && spec !== null ? spec.count : spec;
    checkCount(name, count);
    out.set(stream, count);
  }
  return out;
}

function checkCount(option: string, count: unknown): asserts count is number {
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_PARTITIONS)
    throw new StreamBatchAckConfigError(
      option,
      `the partition count must be a whole number from 1 to ${MAX_PARTITIONS}, got ${JSON.stringify(count) ?? String(count)}.`,
    );
}

/** The physical streams of the logical streams, and the way back. */
export class PartitionLayout {
  private readonly byPhysical = new Map<string, StreamPartition>();

  constructor(readonly counts: ReadonlyMap<string, number>) {
    for (const [logical, count] of counts)
      partitionStreams(logical, count).forEach((stream, partition) =>
        this.byPhysical.set(stream, {
          logicalStream: logical,
          partition,
          partitions: count,
          stream,
        }),
      );
  }

  /** The partition count of `logical`, or undefined when it is not partitioned. */
  count(logical: string): number | undefined {
    return this.counts.get(logical);
  }

  /** The physical streams of `logical`: its partitions, or `[logical]` when it is not partitioned. */
  streams(logical: string): string[] {
    const count = this.counts.get(logical);
    return count === undefined ? [logical] : partitionStreams(logical, count);
  }

  /** The partition a physical stream is, or undefined for a stream that is no partition. */
  locate(physical: string): StreamPartition | undefined {
    return this.byPhysical.get(physical);
  }
}

/**
 * Chooses the partition of each emitted message: the key's hash modulo the count, or, without a
 * key, the next partition in turn (round robin per logical stream; order is then not kept).
 */
export class PartitionRouter {
  private readonly turns = new Map<string, number>();

  constructor(readonly layout: PartitionLayout) {}

  /** The physical stream for a message to `logical` with `key` (`logical` itself when not partitioned). */
  route(logical: string, key: string | undefined): string {
    const count = this.layout.count(logical);
    if (count === undefined) return logical;
    let index: number;
    if (key === undefined) {
      index = this.turns.get(logical) ?? 0;
      this.turns.set(logical, (index + 1) % count);
    } else index = partitionOf(key, count);
    return partitionStream(logical, index, count);
  }
}
