import { StreamBatchAckConfigError } from '../core/errors';
import { partitionOf } from '../core/partition-hash';
import { keySlot } from '../redis/keys';
import {
  MAX_PARTITIONS,
  PartitionLayout,
  PartitionRouter,
  partitionStream,
  partitionStreams,
  partitionTags,
  resolvePartitions,
} from './partition-layout';

const range = (i: number, n: number) => [
  Math.floor((i * 16384) / n),
  Math.floor(((i + 1) * 16384) / n),
];

describe('partitionTags (hash tags spread over the slot space)', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 64, 100])(
    'N=%i: partition i has its slot in the i-th of N equal slot ranges, so all slots are distinct',
    (n) => {
      const tags = partitionTags(n);
      expect(tags).toHaveLength(n);
      tags.forEach((tag, i) => {
        const [from, to] = range(i, n);
        expect(keySlot(tag)).toBeGreaterThanOrEqual(from);
        expect(keySlot(tag)).toBeLessThan(to);
      });
      expect(new Set(tags.map(keySlot)).size).toBe(n);
    },
  );

  it('takes the first candidate that fits: "i", then "i.1", "i.2", ...', () => {
    for (const n of [3, 6, 16]) {
      partitionTags(n).forEach((tag, i) => {
        const k = tag === String(i) ? 0 : Number(tag.split('.')[1]);
        const [from, to] = range(i, n);
        for (let j = 0; j < k; j++) {
          const slot = keySlot(j === 0 ? String(i) : `${i}.${j}`);
          expect(slot >= from && slot < to).toBe(false);
        }
      });
    }
  });

  it('documented names (stable across versions: producers and consumers must agree)', () => {
    expect(partitionTags(1)).toEqual(['0']);
    expect(partitionTags(4)).toEqual(['0.1', '1.3', '2.1', '3.3']);
    expect(partitionStreams('ticks', 6)).toEqual([
      'ticks:{0.1}',
      'ticks:{1.3}',
      'ticks:{2}',
      'ticks:{3.10}',
      'ticks:{4.11}',
      'ticks:{5.4}',
    ]);
    expect(partitionStream('ticks', 2, 6)).toBe('ticks:{2}');
  });

  it('a partition and its default dead-letter stream share the slot', () => {
    for (const stream of partitionStreams('orders', 8))
      expect(keySlot(`${stream}:dlq`)).toBe(keySlot(stream));
  });

  it('handles the largest count', () => {
    expect(new Set(partitionTags(MAX_PARTITIONS).map(keySlot)).size).toBe(MAX_PARTITIONS);
  });
});

describe('resolvePartitions (the partitions option)', () => {
  it('accepts counts and { count }', () => {
    expect(resolvePartitions({ ticks: 4, trades: { count: 2 } })).toEqual(
      new Map([
        ['ticks', 4],
        ['trades', 2],
      ]),
    );
    expect(resolvePartitions(undefined).size).toBe(0);
  });

  it.each([
    [{ ticks: 0 }, 'partitions.ticks', /whole number from 1 to 1024, got 0/],
    [{ ticks: -2 }, 'partitions.ticks', /got -2/],
    [{ ticks: 2.5 }, 'partitions.ticks', /got 2.5/],
    [{ ticks: 1025 }, 'partitions.ticks', /got 1025/],
    [{ ticks: '4' }, 'partitions.ticks', /got "4"/],
    [{ ticks: { count: Number.NaN } }, 'partitions.ticks', /got null/],
    [{ ticks: {} }, 'partitions.ticks', /got undefined/],
    [{ '{ticks}': 4 }, 'partitions.{ticks}', /may not be empty or contain "\{" or "\}"/],
    [[4], 'partitions', /expected an object/],
    [4, 'partitions', /expected an object/],
  ])('refuses %j, naming %s', (value, option, message) => {
    let error: unknown;
    try {
      resolvePartitions(value as never);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(StreamBatchAckConfigError);
    expect((error as StreamBatchAckConfigError).option).toBe(option);
    expect((error as Error).message).toMatch(message);
  });
});

describe('PartitionLayout and PartitionRouter', () => {
  const layout = new PartitionLayout(new Map([['ticks', 4]]));

  it('maps logical streams to partitions and back', () => {
    expect(layout.streams('ticks')).toEqual(partitionStreams('ticks', 4));
    expect(layout.streams('other')).toEqual(['other']);
    expect(layout.locate('ticks:{1.3}')).toEqual({
      logicalStream: 'ticks',
      partition: 1,
      partitions: 4,
      stream: 'ticks:{1.3}',
    });
    expect(layout.locate('ticks')).toBeUndefined();
  });

  it('routes a key to partitionOf(key, N), and messages without a key in turn', () => {
    const router = new PartitionRouter(layout);
    expect(router.route('ticks', 'SYM001')).toBe(
      partitionStream('ticks', partitionOf('SYM001', 4), 4),
    );
    expect(router.route('other', 'SYM001')).toBe('other');
    const turns = Array.from({ length: 8 }, () => router.route('ticks', undefined));
    expect(turns).toEqual([...partitionStreams('ticks', 4), ...partitionStreams('ticks', 4)]);
  });
});
