import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import {
  RedisStreamsBatchContext,
  RedisStreamsContext,
  RedisStreamsServerOptions,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { DedicatedRedis, startRedisServer } from './support/redis-server';
import {
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  REDIS_URL,
  startMicroservice,
  waitFor,
  xackCalls,
} from './support/helpers';

jest.setTimeout(60_000);

const prefix = randomPrefix('batch-handler');
const GROUP = 'g';
const SHAPE = `${prefix}shape`;
const PARTIAL = `${prefix}partial`;
const THROWS = `${prefix}throws`;
const COUNTED = `${prefix}counted`;
const MIXED_BATCH = `${prefix}mixed-batch`;
const MIXED_SINGLE = `${prefix}mixed-single`;

interface Tick {
  n: number;
}

/** One call of a batch handler, as it saw it. */
interface SeenBatch {
  payloads: Tick[];
  ids: string[];
  deliveries: number[];
  headers: Record<string, string>[];
  ctx: RedisStreamsBatchContext;
}

const seen = new Map<string, SeenBatch[]>();
function record(stream: string, payloads: Tick[], ctx: RedisStreamsBatchContext): void {
  const list = seen.get(stream) ?? [];
  list.push({
    payloads: [...payloads],
    ids: ctx.entries.map((e) => e.id),
    deliveries: ctx.entries.map((e) => e.deliveries),
    headers: ctx.entries.map((e) => ({ ...e.headers })),
    ctx,
  });
  seen.set(stream, list);
}
const batchesOf = (stream: string): SeenBatch[] => seen.get(stream) ?? [];
/** n -> the deliveries it was seen with, over every batch of `stream`. */
function deliveriesByN(stream: string): Map<number, number[]> {
  const out = new Map<number, number[]>();
  for (const b of batchesOf(stream))
    b.payloads.forEach((p, i) => out.set(p.n, [...(out.get(p.n) ?? []), b.deliveries[i]]));
  return out;
}

@Controller()
class ShapeController {
  @StreamEventPattern(SHAPE, { batch: true })
  handle(@Payload() ticks: Tick[], @Ctx() ctx: RedisStreamsBatchContext) {
    record(SHAPE, ticks, ctx);
  }
}

const FAIL_ONCE = new Set([3, 7]);
@Controller()
class PartialController {
  @StreamEventPattern(PARTIAL, { batch: true })
  handle(@Payload() ticks: Tick[], @Ctx() ctx: RedisStreamsBatchContext) {
    record(PARTIAL, ticks, ctx);
    ticks.forEach((t, i) => {
      if (FAIL_ONCE.has(t.n) && ctx.entries[i].deliveries === 1)
        ctx.fail(ctx.entries[i].id, new Error(`tick ${t.n} failed`));
    });
  }
}

let throwsCalls = 0;
@Controller()
class ThrowingController {
  @StreamEventPattern(THROWS, { batch: true })
  async handle(@Payload() ticks: Tick[], @Ctx() ctx: RedisStreamsBatchContext) {
    record(THROWS, ticks, ctx);
    if (++throwsCalls === 1) throw new Error('the whole batch failed');
  }
}

@Controller()
class CountedController {
  @StreamEventPattern(COUNTED, { batch: true })
  handle(@Payload() ticks: Tick[], @Ctx() ctx: RedisStreamsBatchContext) {
    record(COUNTED, ticks, ctx);
    ticks.forEach((t, i) => {
      if (t.n % 100 === 7 && ctx.entries[i].deliveries === 1) ctx.fail(ctx.entries[i].id);
    });
  }
}

const singles: { payload: unknown; ctx: RedisStreamsContext }[] = [];
@Controller()
class MixedController {
  @StreamEventPattern(MIXED_BATCH, { batch: true })
  handleBatch(@Payload() ticks: Tick[], @Ctx() ctx: RedisStreamsBatchContext) {
    record(MIXED_BATCH, ticks, ctx);
  }

  @StreamEventPattern(MIXED_SINGLE)
  handleOne(@Payload() tick: Tick, @Ctx() ctx: RedisStreamsContext) {
    singles.push({ payload: tick, ctx });
  }
}

const baseOptions = (connection: string, consumer: string): RedisStreamsServerOptions => ({
  connection,
  group: GROUP,
  consumer,
  read: { count: 50, blockMs: 50 },
  ack: { batchSize: 100, intervalMs: 20 },
  // Retries come from the backoff schedule (XCLAIM), never from the claim loop in these tests.
  claim: { minIdleMs: 30_000, intervalMs: 30_000 },
  retry: { initialMs: 100, factor: 2, maxMs: 400, jitter: 0 },
  deadLetter: { maxDeliveries: 5 },
});

describe('batch handlers: @EventPattern(stream, { batch: true })', () => {
  let redis: Redis;
  let app: INestMicroservice | undefined;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('gets T[] and a RedisStreamsBatchContext whose entries (ids, deliveries, headers) follow the payload order', async () => {
    // Written before the server starts: one XREADGROUP returns all of them, as one batch.
    const ids: string[] = [];
    const headers: Record<string, string>[] = [];
    for (let n = 0; n < 12; n++) {
      const h: Record<string, string> =
        n % 3 === 0 ? { traceparent: `00-${String(n).padStart(32, '0')}-00f067aa0ba902b7-01` } : {};
      const fields = ['data', JSON.stringify({ n })];
      if (Object.keys(h).length > 0) fields.push('headers', JSON.stringify(h));
      ids.push((await redis.xadd(SHAPE, '*', ...fields)) as string);
      headers.push(h);
    }
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [ShapeController] },
      baseOptions(REDIS_URL, 'c-shape'),
    ));
    await waitFor('the batch handled and acked', async () => {
      return batchesOf(SHAPE).length === 1 && (await pendingCount(redis, SHAPE, GROUP)) === 0;
    });

    const [batch] = batchesOf(SHAPE);
    expect(batch.payloads).toEqual(Array.from({ length: 12 }, (_, n) => ({ n })));
    expect(batch.ctx).toBeInstanceOf(RedisStreamsBatchContext);
    expect(batch.ctx.stream).toBe(SHAPE);
    expect(batch.ctx.group).toBe(GROUP);
    expect(batch.ctx.consumer).toBe('c-shape');
    expect(batch.ids).toEqual(ids);
    expect(batch.deliveries).toEqual(ids.map(() => 1));
    expect(batch.headers).toEqual(headers);
    batch.ctx.entries.forEach((e, i) => expect(JSON.parse(e.fields.data)).toEqual({ n: i }));
    expect(batch.ctx.idempotency).toBeUndefined(); // no idempotency configured
    expect(batch.ctx.entries.every((e) => e.idempotencyRecord === undefined)).toBe(true);
    expect(() => batch.ctx.fail('0-1')).toThrow(/no entry with this id/);
    expect(server.metrics()).toMatchObject({ delivered: 12, succeeded: 12, batches: 1, failed: 0 });
  });

  it('ctx.fail(id) retries only the failed ids: they come back in a later batch with deliveries 2, the others never again', async () => {
    const ids = await produce(
      redis,
      PARTIAL,
      Array.from({ length: 10 }, (_, n) => ({ n })),
    );
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [PartialController] },
      baseOptions(REDIS_URL, 'c-partial'),
    ));
    await waitFor('the failed ticks retried and everything acked', async () => {
      const byN = deliveriesByN(PARTIAL);
      return (
        [...FAIL_ONCE].every((n) => byN.get(n)?.length === 2) &&
        server.pendingAcks === 0 &&
        server.waitingRetries === 0 &&
        (await pendingCount(redis, PARTIAL, GROUP)) === 0
      );
    });

    const [first, ...later] = batchesOf(PARTIAL);
    expect(first.ids).toEqual(ids);
    expect(first.deliveries).toEqual(ids.map(() => 1));
    expect(later.length).toBeGreaterThanOrEqual(1);
    for (const b of later) {
      expect(b.payloads.every((p) => FAIL_ONCE.has(p.n))).toBe(true);
      expect(b.deliveries.every((d) => d === 2)).toBe(true);
    }
    const byN = deliveriesByN(PARTIAL);
    for (let n = 0; n < 10; n++)
      expect([n, byN.get(n)]).toEqual([n, FAIL_ONCE.has(n) ? [1, 2] : [1]]);
    expect(server.metrics()).toMatchObject({
      succeeded: 10,
      failed: 2,
      retried: 2,
      deadLettered: 0,
    });
    expect(await redis.xlen(`${PARTIAL}:dlq`)).toBe(0);
  });

  it('a thrown error retries the whole batch (every entry again, with deliveries 2)', async () => {
    const ids = await produce(
      redis,
      THROWS,
      Array.from({ length: 6 }, (_, n) => ({ n })),
    );
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [ThrowingController] },
      baseOptions(REDIS_URL, 'c-throws'),
    ));
    await waitFor('every entry retried and acked', async () => {
      const byN = deliveriesByN(THROWS);
      return (
        ids.every((_, n) => byN.get(n)?.length === 2) &&
        server.pendingAcks === 0 &&
        (await pendingCount(redis, THROWS, GROUP)) === 0
      );
    });
    const [first, ...later] = batchesOf(THROWS);
    expect(first.ids).toEqual(ids);
    expect(first.deliveries).toEqual(ids.map(() => 1));
    expect(later.flatMap((b) => b.ids).sort()).toEqual([...ids].sort());
    expect(later.every((b) => b.deliveries.every((d) => d === 2))).toBe(true);
    expect(server.metrics()).toMatchObject({ succeeded: 6, failed: 6, retried: 6 });
    expect(await redis.xlen(`${THROWS}:dlq`)).toBe(0);
  });

  it('per-message handlers keep working next to a batch handler on another stream of the same app', async () => {
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [MixedController] },
      baseOptions(REDIS_URL, 'c-mixed'),
    ));
    const batchIds = await produce(
      redis,
      MIXED_BATCH,
      Array.from({ length: 30 }, (_, n) => ({ n })),
    );
    const singleIds = await produce(
      redis,
      MIXED_SINGLE,
      Array.from({ length: 30 }, (_, n) => ({ n })),
    );
    await waitFor('both streams handled and acked', async () => {
      return (
        singles.length === 30 &&
        batchesOf(MIXED_BATCH).reduce((sum, b) => sum + b.ids.length, 0) === 30 &&
        (await pendingCount(redis, MIXED_BATCH, GROUP)) === 0 &&
        (await pendingCount(redis, MIXED_SINGLE, GROUP)) === 0
      );
    });
    // the per-message handler: one payload (not an array) and a RedisStreamsContext per entry
    const byId = new Map(singles.map((s) => [s.ctx.id, s]));
    expect([...byId.keys()].sort()).toEqual([...singleIds].sort());
    singleIds.forEach((id, n) => expect(byId.get(id)!.payload).toEqual({ n }));
    for (const s of singles) {
      expect(s.ctx).toBeInstanceOf(RedisStreamsContext);
      expect(s.ctx.stream).toBe(MIXED_SINGLE);
      expect(s.ctx.deliveries).toBe(1);
    }
    // the batch handler: arrays, in stream order, each entry once
    const batches = batchesOf(MIXED_BATCH);
    expect(batches.flatMap((b) => b.ids)).toEqual(batchIds);
    expect(batches.flatMap((b) => b.payloads)).toEqual(
      Array.from({ length: 30 }, (_, n) => ({ n })),
    );
    for (const b of batches) expect(b.ctx.stream).toBe(MIXED_BATCH);
    expect(server.metrics()).toMatchObject({ delivered: 60, succeeded: 60, failed: 0 });
  });
});

describe('batch handlers keep XACKs batched (INFO commandstats on a dedicated redis-server)', () => {
  let redisServer: DedicatedRedis;
  let redis: Redis;
  let app: INestMicroservice | undefined;

  beforeAll(async () => {
    redisServer = await startRedisServer();
    redis = new Redis(redisServer.url);
  });

  afterAll(async () => {
    await app?.close();
    await redis.quit();
    await redisServer.stop();
  });

  it('1000 messages in batches of 500, 10 of them failed once with ctx.fail(): exactly 2 XACK calls', async () => {
    await produce(
      redis,
      COUNTED,
      Array.from({ length: 1000 }, (_, n) => ({ n })),
    );
    const before = await xackCalls(redis);
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [CountedController] },
      {
        ...baseOptions(redisServer.url, 'c-counted'),
        read: { count: 500, blockMs: 50 },
        ack: { batchSize: 500, intervalMs: 60_000 },
        claim: { minIdleMs: 60_000, intervalMs: 60_000 },
      },
    ));
    await waitFor('1000 handled and acked', async () => {
      return (
        server.metrics().succeeded === 1000 &&
        server.pendingAcks === 0 &&
        (await pendingCount(redis, COUNTED, GROUP)) === 0
      );
    });
    expect((await xackCalls(redis)) - before).toBe(2);
    const batches = batchesOf(COUNTED);
    // two read batches of 500, then the retries of the 10 failed entries
    expect(batches.slice(0, 2).map((b) => b.ids.length)).toEqual([500, 500]);
    expect(
      batches
        .slice(2)
        .flatMap((b) => b.payloads.map((p) => p.n))
        .sort((a, b) => a - b),
    ).toEqual(Array.from({ length: 10 }, (_, i) => i * 100 + 7));
    expect(server.metrics()).toMatchObject({ failed: 10, retried: 10, succeeded: 1000 });
    await app!.close();
    app = undefined;
    expect((await xackCalls(redis)) - before).toBe(2); // close() had nothing left to flush
  });
});
