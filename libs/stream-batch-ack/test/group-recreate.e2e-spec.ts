import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  RedisStreamsContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import type { GroupRecreatedEvent } from '@nest-redis-resilience/stream-batch-ack';
import {
  RedisStreamsHealthIndicator,
  RedisStreamsHealthModule,
} from '@nest-redis-resilience/stream-batch-ack/health';
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

const prefix = randomPrefix('regroup');
const STREAM = `${prefix}events`;
const EFFECTS = `${prefix}effects`;
const GROUP = 'g';
const N = 40;
const M = 25;

let effects: Redis;

@Controller()
class CountingController {
  @StreamEventPattern(STREAM)
  async handle(@Payload() data: { n: number }, @Ctx() _ctx: RedisStreamsContext) {
    await effects.hincrby(EFFECTS, String(data.n), 1);
  }
}

/** a > b, for stream ids. */
const isAfter = (a: string, b: string) => {
  const [am, as] = a.split('-').map(BigInt);
  const [bm, bs] = b.split('-').map(BigInt);
  return am > bm || (am === bm && as > bs);
};

const handledCount = async () => Object.keys(await effects.hgetall(EFFECTS)).length;

describe.each([
  ['0', 'XGROUP DESTROY'],
  ['$', 'XGROUP DESTROY'],
  ['0', 'DEL of the stream'],
  ['$', 'DEL of the stream'],
])('a consumer group lost while running (startId %p, %s)', (startId, loss) => {
  let redis: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;
  const events: GroupRecreatedEvent[] = [];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    effects = new Redis(REDIS_URL);
    ({ app, server } = await startMicroservice(
      { controllers: [CountingController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        startId,
        read: { count: 10, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        claim: { minIdleMs: 30_000, intervalMs: 30_000 },
      },
    ));
    server.events.on('redis_streams.group.recreated', (e) => events.push(e));
  });

  afterAll(async () => {
    await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effects.quit();
  });

  it(`is recreated after the last entry this server read: the ${N} handled entries do not run again, the ${M} written after the loss all run once`, async () => {
    const before = await produce(
      redis,
      STREAM,
      Array.from({ length: N }, (_, n) => ({ n })),
    );
    await waitFor(
      `the first ${N} entries handled and acknowledged`,
      async () => (await handledCount()) === N && (await pendingCount(redis, STREAM, GROUP)) === 0,
    );

    // The loss and the next entries in one transaction: the server can only notice after them.
    const tx = redis.multi();
    if (loss === 'DEL of the stream') tx.del(STREAM);
    else tx.call('XGROUP', 'DESTROY', STREAM, GROUP);
    for (let n = N; n < N + M; n++) tx.xadd(STREAM, '*', 'data', JSON.stringify({ n }));
    const replies = (await tx.exec()) ?? [];
    const after = replies.slice(1).map(([, id]) => id as string);
    // Stream ids are time-based: entries written after a DEL still come after the old ones.
    expect(after.every((id) => isAfter(id, before[N - 1]))).toBe(true);

    await waitFor(
      `the ${M} new entries handled and acknowledged`,
      async () =>
        (await handledCount()) === N + M && (await pendingCount(redis, STREAM, GROUP)) === 0,
    );
    await sleep(300); // a replay of the old entries would show up by now
    const all = await effects.hgetall(EFFECTS);
    expect(Object.entries(all).filter(([, count]) => count !== '1')).toEqual([]);
    expect(Object.keys(all)).toHaveLength(N + M);

    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      stream: STREAM,
      group: GROUP,
      consumer: 'c1',
      fromId: before[N - 1],
      fromStartId: false,
    });
  }, 30_000);

  it('the health indicator stays up and reports the recreation', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisStreamsHealthModule],
    }).compile();
    try {
      const health = moduleRef.get(RedisStreamsHealthIndicator);
      const result = await health.isHealthy('events', {
        client: server,
        stream: STREAM,
        group: GROUP,
      });
      expect(result.events).toMatchObject({
        status: 'up',
        groupRecreated: { stream: STREAM, fromId: events[0].fromId, count: 1 },
      });
      const { at } = result.events.groupRecreated as { at: string };
      expect(Date.parse(at)).toBeGreaterThan(Date.now() - 60_000);
    } finally {
      await moduleRef.close();
    }
  });
});

describe('a group lost before this server read anything from the stream', () => {
  const QUIET = `${prefix}quiet`;
  let redis: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;

  @Controller()
  class QuietController {
    @StreamEventPattern(QUIET)
    async handle(@Payload() data: { n: number }) {
      await effects.hincrby(`${EFFECTS}:quiet`, String(data.n), 1);
    }
  }

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    effects = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effects.quit();
  });

  it("starts from the group's last-delivered-id it found at start-up, not from startId", async () => {
    // Another consumer of the group handled these before this server started.
    await redis.call('XGROUP', 'CREATE', QUIET, GROUP, '$', 'MKSTREAM');
    const old = await produce(
      redis,
      QUIET,
      Array.from({ length: 5 }, (_, n) => ({ n })),
    );
    await redis.call('XREADGROUP', 'GROUP', GROUP, 'other', 'STREAMS', QUIET, '>');
    await redis.call('XACK', QUIET, GROUP, ...old);

    ({ app, server } = await startMicroservice(
      { controllers: [QuietController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c2',
        startId: '0',
        read: { count: 10, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
      },
    ));
    const events: GroupRecreatedEvent[] = [];
    server.events.on('redis_streams.group.recreated', (e) => events.push(e));
    const tx = redis.multi().call('XGROUP', 'DESTROY', QUIET, GROUP);
    for (let n = 5; n < 10; n++) tx.xadd(QUIET, '*', 'data', JSON.stringify({ n }));
    await tx.exec();
    await waitFor(
      'the 5 new entries handled',
      async () => (await redis.hlen(`${EFFECTS}:quiet`)) === 5,
    );
    await sleep(300);
    expect(Object.keys(await redis.hgetall(`${EFFECTS}:quiet`)).sort()).toEqual([
      '5',
      '6',
      '7',
      '8',
      '9',
    ]);
    expect(events).toMatchObject([{ stream: QUIET, fromId: old[4], fromStartId: false }]);
  }, 30_000);
});

describe('two consumers notice the lost group', () => {
  const SHARED = `${prefix}shared`;
  let redis: Redis;
  const apps: INestMicroservice[] = [];

  @Controller()
  class SharedController {
    @StreamEventPattern(SHARED)
    async handle(@Payload() data: { n: number }) {
      await effects.hincrby(`${EFFECTS}:shared`, String(data.n), 1);
    }
  }

  const start = async (consumer: string) => {
    const started = await startMicroservice(
      { controllers: [SharedController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer,
        startId: '0',
        read: { count: 10, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
      },
    );
    apps.push(started.app);
    return started.server;
  };

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    effects = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effects.quit();
  });

  it('one recreates it (one event), the other finds it there (BUSYGROUP); every entry runs once', async () => {
    const handled = async () => redis.hlen(`${EFFECTS}:shared`);
    const a = await start('a');
    await produce(
      redis,
      SHARED,
      Array.from({ length: 20 }, (_, n) => ({ n })),
    );
    await waitFor('the first 20 handled by a', async () => (await handled()) === 20);
    const b = await start('b'); // knows the group's last-delivered-id from its start-up
    const events: GroupRecreatedEvent[] = [];
    for (const s of [a, b]) s.events.on('redis_streams.group.recreated', (e) => events.push(e));

    const tx = redis.multi().call('XGROUP', 'DESTROY', SHARED, GROUP);
    for (let n = 20; n < 40; n++) tx.xadd(SHARED, '*', 'data', JSON.stringify({ n }));
    await tx.exec();
    await waitFor(
      'the 20 new entries handled and acknowledged',
      async () => (await handled()) === 40 && (await pendingCount(redis, SHARED, GROUP)) === 0,
    );
    await sleep(300);
    const all = await redis.hgetall(`${EFFECTS}:shared`);
    expect(Object.entries(all).filter(([, count]) => count !== '1')).toEqual([]);
    expect(events).toHaveLength(1);
    expect(['a', 'b']).toContain(events[0].consumer);
  }, 30_000);
});
