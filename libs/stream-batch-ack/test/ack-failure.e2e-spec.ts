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
  sleep,
  startMicroservice,
  waitFor,
} from './support/helpers';

// Makes XACK fail on a redis-server of its own (ACL `-xack` for the default user), then drops every connection.
const prefix = randomPrefix('ack-failure');
const STREAM = `${prefix}ticks`;
const GROUP = 'g';

const handled = new Map<string, number>();

@Controller()
class CountingController {
  @StreamEventPattern(STREAM)
  handle(@Payload() _data: unknown, @Ctx() ctx: RedisStreamsContext) {
    handled.set(ctx.id, (handled.get(ctx.id) ?? 0) + 1);
  }
}

describe('XACK failing for a while (dedicated redis-server)', () => {
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
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 20, intervalMs: 20, backoff: { initialMs: 20, maxMs: 100 } },
        claim: { minIdleMs: 150, intervalMs: 50 }, // claims run during the outage: queued ids must not be handled twice
      },
    ));
  });

  afterAll(async () => {
    await app.close();
    await redis.quit();
    await redisServer.stop();
  });

  it('rejected XACKs (NOPERM): no id is lost, nothing is handled twice, the pending list empties once XACK works again', async () => {
    await redis.call('ACL', 'SETUSER', 'default', '-xack');
    const ids = await produce(
      redis,
      STREAM,
      Array.from({ length: 200 }, (_, n) => ({ n })),
    );
    await waitFor('200 handled', () => handled.size === 200);
    await sleep(600); // several failed flushes and claim rounds
    expect(await pendingCount(redis, STREAM, GROUP)).toBe(200);
    expect(server.pendingAcks).toBe(200);

    await redis.call('ACL', 'SETUSER', 'default', '+xack');
    await waitFor(
      'pending list empty',
      async () => (await pendingCount(redis, STREAM, GROUP)) === 0,
      10_000,
    );
    await waitFor('XACK replies received', () => server.pendingAcks === 0);
    expect([...handled.keys()].sort()).toEqual([...ids].sort());
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
  });

  it('connections dropped (CLIENT KILL) while messages flow: every message is handled and acked in the end', async () => {
    const before = new Set(handled.keys());
    const ids = await produce(
      redis,
      STREAM,
      Array.from({ length: 300 }, (_, n) => ({ n })),
    );
    await sleep(5);
    await redis.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    const more = await produce(
      redis,
      STREAM,
      Array.from({ length: 300 }, (_, n) => ({ n: 300 + n })),
    );
    await redis.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    const all = [...ids, ...more];
    await waitFor('600 handled', () => all.every((id) => handled.has(id)), 15_000);
    await waitFor(
      'pending list empty',
      async () => (await pendingCount(redis, STREAM, GROUP)) === 0,
      15_000,
    );
    await waitFor('XACK replies received', () => server.pendingAcks === 0);
    expect([...handled.keys()].filter((id) => !before.has(id)).sort()).toEqual([...all].sort());
  });
});
