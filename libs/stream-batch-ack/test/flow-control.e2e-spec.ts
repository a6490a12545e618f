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
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  REDIS_URL,
  sleep,
  startMicroservice,
  waitFor,
} from './support/helpers';

// Flow control: the `concurrency` bound on running handlers, and the `ack.maxPending` pause of
// reading while acknowledgements cannot be sent (XACK denied by ACL on a redis-server of its own).
const prefix = randomPrefix('flow-control');
const CONCURRENT = `${prefix}concurrent`;
const PAUSED = `${prefix}paused`;
const GROUP = 'g';

let running = 0;
let maxRunning = 0;
const concurrentHandled = new Map<string, number>();
const pausedHandled = new Map<string, number>();

@Controller()
class SlowController {
  @StreamEventPattern(CONCURRENT)
  async handle(@Payload() _data: unknown, @Ctx() ctx: RedisStreamsContext) {
    running++;
    maxRunning = Math.max(maxRunning, running);
    try {
      await sleep(5 + (Number(ctx.id.split('-')[1]) % 3) * 5);
      concurrentHandled.set(ctx.id, (concurrentHandled.get(ctx.id) ?? 0) + 1);
    } finally {
      running--;
    }
  }
}

@Controller()
class CountingController {
  @StreamEventPattern(PAUSED)
  handle(@Payload() _data: unknown, @Ctx() ctx: RedisStreamsContext) {
    pausedHandled.set(ctx.id, (pausedHandled.get(ctx.id) ?? 0) + 1);
  }
}

describe('concurrency: never more than N handlers in flight', () => {
  let redis: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app, server } = await startMicroservice(
      { controllers: [SlowController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 100, blockMs: 50 },
        ack: { batchSize: 50, intervalMs: 20 },
        concurrency: 5,
      },
    ));
  });

  afterAll(async () => {
    await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('300 slow messages with concurrency 5: at most 5 handlers ran at once, every message was handled once and acked', async () => {
    const ids = await produce(
      redis,
      CONCURRENT,
      Array.from({ length: 300 }, (_, n) => ({ n })),
    );
    await waitFor('300 handled', () => concurrentHandled.size === 300, 20_000);
    await waitFor(
      'pending list empty',
      async () => (await pendingCount(redis, CONCURRENT, GROUP)) === 0,
    );
    expect(maxRunning).toBe(5); // reached, never exceeded
    expect(server.inFlightCount).toBe(0);
    expect([...concurrentHandled.keys()].sort()).toEqual([...ids].sort());
    expect([...concurrentHandled.values()].every((n) => n === 1)).toBe(true);
  });
});

describe('ack.maxPending: reading pauses while the ack queue is full (XACK denied, dedicated redis-server)', () => {
  const MAX_PENDING = 50;
  const READ_COUNT = 20;
  let redisServer: DedicatedRedis;
  let redis: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;

  beforeAll(async () => {
    redisServer = await startRedisServer();
    redis = new Redis(redisServer.url);
    ({ app, server } = await startMicroservice(
      { controllers: [CountingController] },
      {
        connection: redisServer.url,
        group: GROUP,
        consumer: 'c1',
        read: { count: READ_COUNT, blockMs: 50 },
        ack: {
          batchSize: 10,
          intervalMs: 10,
          maxPending: MAX_PENDING,
          backoff: { initialMs: 20, maxMs: 100 },
        },
        claim: { minIdleMs: 60_000, intervalMs: 1000 },
        shutdownTimeoutMs: 2000,
      },
    ));
  });

  afterAll(async () => {
    await redis.call('ACL', 'SETUSER', 'default', '+xack'); // in case the test failed half-way
    await app.close();
    await redis.quit();
    await redisServer.stop();
  }, 15_000);

  it('with XACK failing, no more than maxPending of 500 messages are taken (running or waiting for their ack); once XACK works all 500 are handled once and acked', async () => {
    await redis.call('ACL', 'SETUSER', 'default', '-xack');
    const ids = await produce(
      redis,
      PAUSED,
      Array.from({ length: 500 }, (_, n) => ({ n })),
    );
    await waitFor('the ack queue to fill', () => server.pendingAcks >= MAX_PENDING);
    await sleep(500); // many read-loop turns and failed flushes: reading must stay paused
    const taken = pausedHandled.size;
    expect(taken).toBe(MAX_PENDING); // filled up to the bound, and not one more
    // What was taken is exactly what Redis shows as delivered and unacknowledged.
    expect(await pendingCount(redis, PAUSED, GROUP)).toBe(taken);
    expect(server.pendingAcks).toBe(taken);

    await redis.call('ACL', 'SETUSER', 'default', '+xack');
    await waitFor('500 handled', () => pausedHandled.size === 500, 15_000);
    await waitFor(
      'pending list empty',
      async () => (await pendingCount(redis, PAUSED, GROUP)) === 0,
      10_000,
    );
    expect([...pausedHandled.keys()].sort()).toEqual([...ids].sort());
    expect([...pausedHandled.values()].every((n) => n === 1)).toBe(true);
  });
});
