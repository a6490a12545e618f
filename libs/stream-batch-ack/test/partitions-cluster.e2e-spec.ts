import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Cluster } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  PartitionCountMismatchError,
  partitionOf,
  partitionStream,
  partitionStreams,
  RedisStreamsContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import { keySlot } from '../src/redis/keys';
import { startMicroservice, waitFor } from './support/helpers';

// A throwaway 3-master Redis Cluster (default sharding: three equal slot ranges).
const TICKS = 'sba-pc-ticks';
const N = 6;
const GROUP = 'g';
const POISON = 'SYM-POISON';

interface Tick {
  sym: string;
  seq: number;
}
const seen: (Tick & { consumer: string; partition?: number; stream: string })[] = [];

@Controller()
class TicksController {
  @StreamEventPattern(TICKS)
  tick(@Payload() tick: Tick, @Ctx() ctx: RedisStreamsContext) {
    seen.push({ ...tick, consumer: ctx.consumer, partition: ctx.partition, stream: ctx.stream });
    if (tick.sym === POISON) throw new Error('poison');
  }
}

describe('partitioned streams on a Redis Cluster (throwaway 3-node cluster)', () => {
  let redisCluster: ThrowawayCluster;
  let cluster: Cluster;
  const apps: INestMicroservice[] = [];
  const servers: ServerRedisStreams[] = [];

  const options = (consumer: string) => ({
    connection: { cluster: redisCluster.nodes },
    group: GROUP,
    consumer,
    partitions: { [TICKS]: N },
    read: { count: 20, blockMs: 50 },
    ack: { batchSize: 100, intervalMs: 20 },
    deadLetter: { maxDeliveries: 1 },
  });

  beforeAll(async () => {
    redisCluster = await ThrowawayCluster.start();
    cluster = new Cluster(redisCluster.nodes);
    for (const consumer of ['A', 'B']) {
      const started = await startMicroservice(
        { controllers: [TicksController] },
        options(consumer),
      );
      apps.push(started.app);
      servers.push(started.server);
    }
    // Ordered partitions (the default): A took all six alone, and hands three over to B.
    await waitFor(
      'partitions spread over A and B',
      () => servers.every((s) => s.ownedPartitions(TICKS).length === N / 2),
      30_000,
    );
  }, 90_000);

  afterAll(async () => {
    for (const app of apps) await app.close();
    await cluster?.quit();
    await redisCluster?.destroy();
  }, 20_000);

  it('the partitions are in distinct slots, spread over the three masters; each has its own blocking reader', async () => {
    const streams = partitionStreams(TICKS, N);
    expect(new Set(streams.map(keySlot)).size).toBe(N);
    const ranges = (await cluster.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
    const masterOf = (slot: number) => {
      const range = ranges.find(([from, to]) => slot >= from && slot <= to)!;
      return `${range[2][0]}:${range[2][1]}`;
    };
    const perMaster = new Map<string, number>();
    for (const s of streams) {
      const m = masterOf(keySlot(s));
      perMaster.set(m, (perMaster.get(m) ?? 0) + 1);
    }
    expect(perMaster.size).toBe(3);
    for (const count of perMaster.values()) expect(count).toBeLessThanOrEqual(Math.ceil(N / 3) + 1);
    expect(servers[0].readerStreams.map((g) => g.join()).sort()).toEqual([...streams].sort());
  });

  it('emits by key over all partitions; two consumers handle every message once, in order per key; dead letters stay in the slot of their partition', async () => {
    const client = new ClientRedisStreams({
      connection: { cluster: redisCluster.nodes },
      partitions: { [TICKS]: N },
      partitionKey: (_stream, data) => (data as Tick).sym,
    });
    const SYMBOLS = 30;
    const PER_SYMBOL = 10;
    try {
      await client.connect();
      for (let seq = 0; seq < PER_SYMBOL; seq++)
        for (let s = 0; s < SYMBOLS; s++)
          await firstValueFrom(client.emit(TICKS, { sym: `SYM${s}`, seq }));
      await firstValueFrom(client.emit(TICKS, { sym: POISON, seq: 0 }));
    } finally {
      await client.close();
    }
    const poisonStream = partitionStream(TICKS, partitionOf(POISON, N), N);
    const total = SYMBOLS * PER_SYMBOL + 1;
    await waitFor(
      'all handled, nothing pending, the poison message dead-lettered',
      async () => {
        if (seen.length < total) return false;
        const stats = await servers[0].streamStats(TICKS);
        return (
          stats.pending === 0 &&
          stats.lag === 0 &&
          (await cluster.xlen(`${poisonStream}:dlq`)) === 1
        );
      },
      30_000,
    );
    expect(seen).toHaveLength(total);
    expect(new Set(seen.map((t) => `${t.sym}/${t.seq}`)).size).toBe(total);
    expect(new Set(seen.map((t) => t.partition))).toEqual(new Set([0, 1, 2, 3, 4, 5]));
    expect(new Set(seen.map((t) => t.consumer))).toEqual(new Set(['A', 'B']));
    for (const t of seen) {
      expect(t.partition).toBe(partitionOf(t.sym, N));
      expect(t.stream).toBe(partitionStream(TICKS, t.partition!, N));
    }
    for (let s = 0; s < SYMBOLS; s++)
      for (const consumer of ['A', 'B']) {
        const got = seen
          .filter((t) => t.sym === `SYM${s}` && t.consumer === consumer)
          .map((t) => t.seq);
        expect(got).toEqual([...got].sort((a, b) => a - b));
      }

    // The dead letter is in its partition's dead-letter stream, in the same slot.
    expect(keySlot(`${poisonStream}:dlq`)).toBe(keySlot(poisonStream));
    const [[, fields]] = (await cluster.call('XRANGE', `${poisonStream}:dlq`, '-', '+')) as [
      string,
      string[],
    ][];
    expect(fields[fields.indexOf('stream') + 1]).toBe(poisonStream);
    for (const s of partitionStreams(TICKS, N))
      if (s !== poisonStream) expect(await cluster.exists(`${s}:dlq`)).toBe(0);

    const stats = await servers[1].streamStats(TICKS);
    expect(stats.partitions).toHaveLength(N);
    expect(stats.partitions.every((p) => p.exists && p.pending === 0)).toBe(true);
    expect(await cluster.get(`${TICKS}:partitions`)).toBe(String(N));
  }, 60_000);

  it('a server configured with another count refuses to start', async () => {
    const moduleRef = await Test.createTestingModule({ controllers: [TicksController] }).compile();
    const other = moduleRef.createNestMicroservice({
      strategy: new ServerRedisStreams({ ...options('C'), partitions: { [TICKS]: 5 } }),
      logger: false,
    });
    const err = await other.listen().then(
      () => null,
      (e: unknown) => e,
    );
    await other.close();
    expect(err).toBeInstanceOf(PartitionCountMismatchError);
    expect((err as Error).message).toContain(`Stream "${TICKS}" has 6 partitions`);
  }, 30_000);
});
