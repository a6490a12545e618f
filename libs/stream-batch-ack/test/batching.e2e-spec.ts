import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import {
  RedisStreamsContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { DedicatedRedis, startRedisServer } from './support/redis-server';
import {
  pendingCount,
  produce,
  randomPrefix,
  startMicroservice,
  waitFor,
  xackCalls,
} from './support/helpers';

// XACK calls are counted with INFO commandstats on a redis-server that only this file uses.
const prefix = randomPrefix('batching');
const COUNT_STREAM = `${prefix}count`;
const TIME_STREAM = `${prefix}time`;
const GROUP = 'g';

const handled = new Map<string, string[]>();
const handledAt = new Map<string, number>();

@Controller()
class TicksController {
  @StreamEventPattern(COUNT_STREAM)
  onCount(@Payload() data: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    const list = handled.get(ctx.stream) ?? [];
    list.push(ctx.id);
    handled.set(ctx.stream, list);
    expect(typeof data.n).toBe('number');
  }

  @StreamEventPattern(TIME_STREAM)
  async onTime(@Payload() _data: unknown, @Ctx() ctx: RedisStreamsContext) {
    const list = handled.get(ctx.stream) ?? [];
    list.push(ctx.id);
    handled.set(ctx.stream, list);
    handledAt.set(ctx.id, Date.now());
  }
}

describe('ServerRedisStreams batches XACK (INFO commandstats on a dedicated redis-server)', () => {
  jest.setTimeout(60_000);
  let redisServer: DedicatedRedis;
  let redis: Redis;
  let app: INestMicroservice | undefined;

  beforeAll(async () => {
    redisServer = await startRedisServer();
    redis = new Redis(redisServer.url);
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  afterAll(async () => {
    await redis.quit();
    await redisServer.stop();
  });

  it('acks 1000 messages with batchSize 500 in exactly 2 XACK calls, and every message is handled once', async () => {
    const ids = await produce(
      redis,
      COUNT_STREAM,
      Array.from({ length: 1000 }, (_, n) => ({ n })),
    );
    const before = await xackCalls(redis);
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [TicksController] },
      {
        connection: redisServer.url,
        group: GROUP,
        consumer: 'c1',
        read: { count: 500, blockMs: 50 },
        ack: { batchSize: 500, intervalMs: 60_000 },
        claim: { minIdleMs: 60_000, intervalMs: 60_000 },
      },
    ));
    await waitFor(
      '1000 handled and acked',
      async () => (handled.get(COUNT_STREAM)?.length ?? 0) === 1000 && server.pendingAcks === 0,
    );
    expect(await pendingCount(redis, COUNT_STREAM, GROUP)).toBe(0);
    expect((await xackCalls(redis)) - before).toBe(2);
    expect([...(handled.get(COUNT_STREAM) ?? [])].sort()).toEqual([...ids].sort());
    await app.close();
    app = undefined;
    expect((await xackCalls(redis)) - before).toBe(2); // close() had nothing left to flush
  });

  it('acks 3 messages at idle together once intervalMs passed (one XACK, within intervalMs + margin)', async () => {
    const intervalMs = 200;
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [TicksController] },
      {
        connection: redisServer.url,
        group: GROUP,
        consumer: 'c1',
        read: { count: 500, blockMs: 50 },
        ack: { batchSize: 500, intervalMs },
        claim: { minIdleMs: 60_000, intervalMs: 60_000 },
      },
    ));
    const before = await xackCalls(redis);
    const ids = await produce(redis, TIME_STREAM, [{ n: 1 }, { n: 2 }, { n: 3 }]);
    await waitFor('3 handled', () => (handled.get(TIME_STREAM)?.length ?? 0) === 3);
    const firstHandled = Math.min(...ids.map((id) => handledAt.get(id) ?? Infinity));
    await waitFor(
      '3 acked',
      async () => (await pendingCount(redis, TIME_STREAM, GROUP)) === 0,
      5000,
      5,
    );
    const ackedAfter = Date.now() - firstHandled;
    expect(ackedAfter).toBeGreaterThanOrEqual(intervalMs - 20);
    expect(ackedAfter).toBeLessThan(intervalMs + 1500); // generous margin for a loaded machine
    await waitFor('XACK reply received', () => server.pendingAcks === 0);
    expect((await xackCalls(redis)) - before).toBe(1);
    expect(handled.get(TIME_STREAM)).toEqual(ids);
  });
});
