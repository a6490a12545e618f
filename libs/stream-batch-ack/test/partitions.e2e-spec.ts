import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  PartitionCountMismatchError,
  partitionOf,
  partitionStream,
  partitionStreams,
  RedisStreamsBatchContext,
  RedisStreamsContext,
  RedisStreamsRecord,
  ServerRedisStreams,
  StreamBatchAckConfigError,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  RedisStreamsHealthIndicator,
  RedisStreamsHealthModule,
} from '@nest-redis-resilience/stream-batch-ack/health';
import {
  deleteKeys,
  pendingCount,
  randomPrefix,
  readAll,
  REDIS_URL,
  startMicroservice,
  waitFor,
} from './support/helpers';

// Partitioned streams on a single Redis: every partition lives on the one node.
const prefix = randomPrefix('partitions');
const TICKS = `${prefix}ticks`; // 4 partitions, keyed by symbol
const ORDERS = `${prefix}orders`; // 3 partitions, batch handler, poison messages
const SLOW = `${prefix}slow`; // 2 partitions, entries left pending (stats, health)
const GROUP = 'g';
const PARTITIONS = { [TICKS]: 4, [ORDERS]: { count: 3 }, [SLOW]: 2 };

interface Tick {
  sym: string;
  seq: number;
}
interface Seen extends Tick {
  consumer: string;
  stream: string;
  logical: string;
  partition: number | undefined;
  id: string;
}
const seen: Seen[] = [];
const orderBatches: { stream: string; logical: string; partition?: number; n: number[] }[] = [];
const slow: { stream: string; partition?: number }[] = [];

@Controller()
class PartitionsController {
  @StreamEventPattern(TICKS)
  tick(@Payload() tick: Tick, @Ctx() ctx: RedisStreamsContext) {
    seen.push({
      ...tick,
      consumer: ctx.consumer,
      stream: ctx.getStream(),
      logical: ctx.getLogicalStream(),
      partition: ctx.getPartition(),
      id: ctx.id,
    });
  }

  @StreamEventPattern(ORDERS, { batch: true })
  orders(
    @Payload() orders: { n: number; poison?: boolean }[],
    @Ctx() ctx: RedisStreamsBatchContext,
  ) {
    orderBatches.push({
      stream: ctx.stream,
      logical: ctx.logicalStream,
      partition: ctx.partition,
      n: orders.map((o) => o.n),
    });
    orders.forEach((o, i) => {
      if (o.poison) ctx.fail(ctx.entries[i].id, new Error(`poison ${o.n}`));
    });
  }

  @StreamEventPattern(SLOW)
  slow(@Payload() _data: unknown, @Ctx() ctx: RedisStreamsContext) {
    slow.push({ stream: ctx.stream, partition: ctx.partition });
    ctx.skipAck(); // stays pending
  }
}

const serverOptions = (consumer: string) => ({
  connection: REDIS_URL,
  group: GROUP,
  consumer,
  partitions: PARTITIONS,
  read: { count: 10, blockMs: 50 },
  ack: { batchSize: 50, intervalMs: 20 },
  deadLetter: { maxDeliveries: 1 },
});

async function pendingOf(redis: Redis, logical: string, n: number): Promise<number> {
  let sum = 0;
  for (const s of partitionStreams(logical, n)) sum += await pendingCount(redis, s, GROUP);
  return sum;
}

describe('partitioned streams on a single Redis (all partitions on one node)', () => {
  let redis: Redis;
  let client: ClientRedisStreams;
  const apps: INestMicroservice[] = [];
  const servers: ServerRedisStreams[] = [];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    for (const consumer of ['A', 'B']) {
      const { app, server } = await startMicroservice(
        { controllers: [PartitionsController] },
        serverOptions(consumer),
      );
      apps.push(app);
      servers.push(server);
    }
    client = new ClientRedisStreams({
      connection: REDIS_URL,
      partitions: PARTITIONS,
      partitionKey: (_stream, data) => (data as Partial<Tick>).sym,
    });
    await client.connect();
    // Ordered partitions (the default): A took all four alone, and hands two over to B.
    await waitFor(
      'partitions spread over A and B',
      () => servers.every((s) => s.ownedPartitions(TICKS).length === 2),
      20_000,
    );
  }, 30_000);

  afterAll(async () => {
    await client?.close();
    for (const app of apps) await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  }, 20_000);

  it('keeps the order per key across the partitions, with two consumers in one group; every partition is used', async () => {
    const SYMBOLS = 20;
    const PER_SYMBOL = 20;
    const sent: string[] = [];
    for (let seq = 0; seq < PER_SYMBOL; seq++)
      for (let s = 0; s < SYMBOLS; s++)
        sent.push(await firstValueFrom(client.emit(TICKS, { sym: `SYM${s}`, seq })));
    const total = SYMBOLS * PER_SYMBOL;
    await waitFor(
      'all ticks handled and acked',
      async () => seen.length >= total && (await pendingOf(redis, TICKS, 4)) === 0,
      20_000,
    );

    // Each message exactly once, in the partition of its key, with the logical name in the context.
    expect(seen).toHaveLength(total);
    expect(new Set(seen.map((t) => `${t.sym}/${t.seq}`)).size).toBe(total);
    for (const t of seen) {
      expect(t.partition).toBe(partitionOf(t.sym, 4));
      expect(t.stream).toBe(partitionStream(TICKS, t.partition!, 4));
      expect(t.logical).toBe(TICKS);
    }
    expect(new Set(seen.map((t) => t.partition))).toEqual(new Set([0, 1, 2, 3]));
    expect(new Set(seen.map((t) => t.consumer))).toEqual(new Set(['A', 'B']));
    expect(await redis.exists(TICKS)).toBe(0); // nothing went to the unpartitioned name

    // In its partition, a key's entries are in the order they were emitted...
    for (let s = 0; s < SYMBOLS; s++) {
      const sym = `SYM${s}`;
      const inStream = (await readAll(redis, partitionStream(TICKS, partitionOf(sym, 4), 4)))
        .map((e) => JSON.parse(e.fields.data) as Tick)
        .filter((t) => t.sym === sym)
        .map((t) => t.seq);
      expect(inStream).toEqual(Array.from({ length: PER_SYMBOL }, (_, i) => i));
      // ...each partition has one owner, so one consumer handled all of a key...
      expect(new Set(seen.filter((t) => t.sym === sym).map((t) => t.consumer)).size).toBe(1);
      // ...and each consumer saw its share of them in that order.
      for (const consumer of ['A', 'B']) {
        const got = seen.filter((t) => t.sym === sym && t.consumer === consumer).map((t) => t.seq);
        expect(got).toEqual([...got].sort((a, b) => a - b));
      }
    }
    expect(await redis.get(`${TICKS}:partitions`)).toBe('4');
    expect(sent.every((id) => /^\d+-\d+$/.test(id))).toBe(true);
  }, 60_000);

  it('batch handlers get one partition per batch; dead letters land in the dead-letter stream of their partition', async () => {
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
    for (const [n, key] of keys.entries())
      await firstValueFrom(
        client.emit(
          ORDERS,
          new RedisStreamsRecord({ n, poison: n % 2 === 1 }, {}, { partitionKey: key }),
        ),
      );
    await waitFor(
      'orders handled and settled',
      async () => {
        const dead = await Promise.all(
          partitionStreams(ORDERS, 3).map((s) => redis.xlen(`${s}:dlq`)),
        );
        return dead.reduce((a, b) => a + b, 0) === 3 && (await pendingOf(redis, ORDERS, 3)) === 0;
      },
      20_000,
    );
    for (const batch of orderBatches) {
      expect(batch.logical).toBe(ORDERS);
      expect(batch.stream).toBe(partitionStream(ORDERS, batch.partition!, 3));
      for (const n of batch.n) expect(partitionOf(keys[n], 3)).toBe(batch.partition);
    }
    for (const [n, key] of keys.entries()) {
      if (n % 2 === 0) continue;
      const partition = partitionStream(ORDERS, partitionOf(key, 3), 3);
      const dead = await readAll(redis, `${partition}:dlq`);
      const entry = dead.find(
        (d) => JSON.parse(d.fields.fields).data === JSON.stringify({ n, poison: true }),
      );
      expect(entry?.fields.stream).toBe(partition);
      expect(entry?.fields.error).toBe(`poison ${n}`);
    }
  }, 30_000);

  it('server.streamStats() and the health indicator report pending and lag per partition and in sum', async () => {
    for (let n = 0; n < 6; n++) await firstValueFrom(client.emit(SLOW, { n })); // no key: round robin
    await waitFor('6 slow entries delivered', () => slow.length === 6, 10_000);
    expect(slow.filter((s) => s.partition === 0)).toHaveLength(3);
    expect(slow.filter((s) => s.partition === 1)).toHaveLength(3);

    const stats = await servers[0].streamStats(SLOW);
    expect(stats).toMatchObject({ stream: SLOW, group: GROUP, pending: 6, lag: 0 });
    expect(stats.partitions.map((p) => [p.partition, p.stream, p.pending, p.lag])).toEqual([
      [0, partitionStream(SLOW, 0, 2), 3, 0],
      [1, partitionStream(SLOW, 1, 2), 3, 0],
    ]);
    expect(servers[0].partitionStreams(SLOW)).toEqual(partitionStreams(SLOW, 2));

    const moduleRef = await Test.createTestingModule({
      imports: [RedisStreamsHealthModule],
    }).compile();
    const health = moduleRef.get(RedisStreamsHealthIndicator);
    const up = await health.isHealthy('slow', {
      client: servers[0],
      stream: SLOW,
      group: GROUP,
      maxPending: 6,
    });
    expect(up.slow).toMatchObject({ status: 'up', pending: 6, lag: 0 });
    // The partitions this server owns (ordered partitions, the default).
    expect((up.slow as unknown as { owned: number[] }).owned).toEqual(
      servers[0].ownedPartitions(SLOW),
    );
    expect(
      (up.slow as unknown as { partitions: { pending: number }[] }).partitions.map(
        (p) => p.pending,
      ),
    ).toEqual([3, 3]);
    // The bound applies to the sum.
    const down = await health.isHealthy('slow', {
      client: servers[0],
      stream: SLOW,
      group: GROUP,
      maxPending: 5,
    });
    expect(down.slow).toMatchObject({ status: 'down', message: 'pending 6 > 5' });
    // With a client of your own, give the count.
    const own = await health.isHealthy('own', {
      client: redis,
      stream: SLOW,
      group: GROUP,
      partitions: 2,
    });
    expect(own.own).toMatchObject({ status: 'up', pending: 6 });
    const wrong = await health.isHealthy('w', {
      client: redis,
      stream: SLOW,
      group: GROUP,
      partitions: 3,
    });
    expect(wrong.w.status).toBe('down');
  }, 30_000);

  it('trims each partition to about maxLen / N, never an entry the group has not acknowledged', async () => {
    const TRIM = `${prefix}trim`;
    const trimmer = new ClientRedisStreams({
      connection: REDIS_URL,
      partitions: { [TRIM]: 4 },
      maxLen: 40,
      trimEvery: 1_000_000,
    });
    try {
      for (let n = 0; n < 200; n++) await firstValueFrom(trimmer.emit(TRIM, { n }));
      // A group that has read nothing keeps everything.
      await redis.xgroup('CREATE', partitionStream(TRIM, 0, 4), 'lagging', '0');
      expect(await trimmer.trim(TRIM)).toBe(3 * 40);
      const lengths = await Promise.all(partitionStreams(TRIM, 4).map((s) => redis.xlen(s)));
      expect(lengths).toEqual([50, 10, 10, 10]);
    } finally {
      await trimmer.close();
    }
  }, 30_000);

  describe('a partition count that does not match the stored one is refused', () => {
    it('by a server, at start-up, naming the stream, the stored count and the configured one', async () => {
      const withoutTicks: Record<string, number | { count: number }> = { ...PARTITIONS };
      delete withoutTicks[TICKS];
      for (const [partitions, configured] of [
        [{ ...PARTITIONS, [TICKS]: 6 }, 6],
        [withoutTicks, undefined],
      ] as const) {
        const moduleRef = await Test.createTestingModule({
          controllers: [PartitionsController],
        }).compile();
        const other = moduleRef.createNestMicroservice({
          strategy: new ServerRedisStreams({ ...serverOptions('C'), partitions }),
          logger: false,
        });
        const err = await other.listen().then(
          () => null,
          (e: unknown) => e,
        );
        await other.close();
        expect(err).toBeInstanceOf(PartitionCountMismatchError);
        expect((err as PartitionCountMismatchError).code).toBe('PARTITION_MISMATCH');
        expect((err as PartitionCountMismatchError).stream).toBe(TICKS);
        expect((err as PartitionCountMismatchError).stored).toBe(4);
        expect((err as PartitionCountMismatchError).configured).toBe(configured);
      }
    });

    it('with a clear message', async () => {
      const strategy = new ServerRedisStreams({
        ...serverOptions('C'),
        partitions: { ...PARTITIONS, [TICKS]: 6 },
      });
      const moduleRef = await Test.createTestingModule({
        controllers: [PartitionsController],
      }).compile();
      const other = moduleRef.createNestMicroservice({ strategy, logger: false });
      await expect(other.listen()).rejects.toThrow(
        `Stream "${TICKS}" has 4 partitions ("${TICKS}:partitions" = "4", stored by the first producer or consumer), but this server is configured with partitions['${TICKS}'] = 6.`,
      );
      await other.close();
    });

    it('by a client, on connect (so every emit fails with it)', async () => {
      const wrong = new ClientRedisStreams({ connection: REDIS_URL, partitions: { [TICKS]: 5 } });
      await expect(firstValueFrom(wrong.emit(TICKS, { sym: 'X', seq: 0 }))).rejects.toThrow(
        /has 4 partitions .* this client is configured with partitions\[.*\] = 5/,
      );
      await wrong.close();
      const unpartitioned = new ClientRedisStreams({ connection: REDIS_URL });
      await expect(firstValueFrom(unpartitioned.emit(TICKS, { sym: 'X', seq: 0 }))).rejects.toThrow(
        /is partitioned into 4 partitions .* this client has no partitions entry for it/,
      );
      await unpartitioned.close();
      expect(await redis.exists(TICKS)).toBe(0);
    });
  });
});

describe('invalid partition counts fail at construction with StreamBatchAckConfigError (no Redis needed)', () => {
  it.each([0, -1, 2.5, Number.NaN, '3', 5000])('partitions: { ticks: %p }', (count) => {
    const partitions = { ticks: count as number };
    for (const make of [
      () => new ServerRedisStreams({ connection: REDIS_URL, group: 'g', partitions }),
      () => new ClientRedisStreams({ connection: REDIS_URL, partitions }),
    ]) {
      expect(make).toThrow(StreamBatchAckConfigError);
      expect(make).toThrow(
        /Invalid option "partitions.ticks": the partition count must be a whole number from 1 to 1024/,
      );
    }
  });

  it('a stream name with a hash tag, and a partitionKey that is not a function', () => {
    expect(
      () =>
        new ServerRedisStreams({ connection: REDIS_URL, group: 'g', partitions: { '{ticks}': 2 } }),
    ).toThrow(/Invalid option "partitions.\{ticks\}"/);
    expect(
      () => new ClientRedisStreams({ connection: REDIS_URL, partitionKey: 'sym' as never }),
    ).toThrow(/Invalid option "partitionKey"/);
  });
});
