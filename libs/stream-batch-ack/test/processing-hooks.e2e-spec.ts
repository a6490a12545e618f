/*
 * Nest's processing hooks (`server.setOnProcessingStartHook`, `setOnProcessingEndHook`) wrap every
 * handler call of the transport, per-message and batch, the way a tracing library uses them: the
 * start hook runs the handler inside its own async context. Without hooks, the transport calls the
 * handler directly (no step of its own per message); these tests show the hooks still run once set.
 */
import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { AsyncLocalStorage } from 'node:async_hooks';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  RedisStreamsBatchContext,
  RedisStreamsContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  REDIS_URL,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('hooks');
const ONE = `${prefix}one`;
const BATCH = `${prefix}batch`;
const GROUP = 'g';

const trace = new AsyncLocalStorage<string>();
const events: string[] = [];

@Controller()
class HooksController {
  @StreamEventPattern(ONE)
  one(@Payload() order: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    events.push(`handler ${ctx.id} in ${trace.getStore() ?? 'no span'}`);
    if (order.n === 1 && ctx.deliveries === 1) throw new Error('fails once');
  }

  @StreamEventPattern(BATCH, { batch: true })
  batch(@Payload() orders: unknown[], @Ctx() ctx: RedisStreamsBatchContext) {
    events.push(`batch of ${orders.length} in ${trace.getStore() ?? 'no span'}`);
    expect(ctx.entries).toHaveLength(orders.length);
  }
}

describe('Nest processing hooks around the handlers of ServerRedisStreams', () => {
  let redis: Redis;
  let app: INestMicroservice | undefined;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('the start hook runs each handler call in its context, the end hook follows it, failures included', async () => {
    const server = new ServerRedisStreams({
      connection: REDIS_URL,
      group: GROUP,
      consumer: 'c1',
      read: { count: 50, blockMs: 50 },
      ack: { batchSize: 100, intervalMs: 20 },
      retry: { initialMs: 50, factor: 2, maxMs: 100, jitter: 0 },
    });
    server.setOnProcessingStartHook((_transport, ctx, done) => {
      const name =
        ctx instanceof RedisStreamsBatchContext ? 'batch' : (ctx as RedisStreamsContext).id;
      events.push(`start ${name}`);
      return trace.run(`span ${name}`, done);
    });
    server.setOnProcessingEndHook((_transport, ctx) => {
      const name =
        ctx instanceof RedisStreamsBatchContext ? 'batch' : (ctx as RedisStreamsContext).id;
      events.push(`end ${name}`);
    });
    const moduleRef = await Test.createTestingModule({ controllers: [HooksController] }).compile();
    app = moduleRef.createNestMicroservice({ strategy: server, logger: false });
    await app.listen();
    const [ok, failing] = await produce(redis, ONE, [{ n: 0 }, { n: 1 }]);
    await produce(redis, BATCH, [{ n: 0 }, { n: 1 }, { n: 2 }]);
    await waitFor(
      'everything handled and acked',
      async () =>
        events.filter((e) => e.startsWith('end ')).length === 4 &&
        (await pendingCount(redis, BATCH, GROUP)) === 0 &&
        (await pendingCount(redis, ONE, GROUP)) === 0,
    );
    const around = (name: string, handler: string) => {
      const start = events.indexOf(`start ${name}`);
      const inside = events.indexOf(handler);
      const end = events.indexOf(`end ${name}`);
      return start >= 0 && start < inside && inside < end;
    };
    expect(around(ok, `handler ${ok} in span ${ok}`)).toBe(true);
    expect(around(failing, `handler ${failing} in span ${failing}`)).toBe(true);
    // the retry of the failed entry: a second start and end around its second call
    expect(events.filter((e) => e === `start ${failing}`)).toHaveLength(2);
    expect(events.filter((e) => e === `end ${failing}`)).toHaveLength(2);
    expect(around('batch', 'batch of 3 in span batch')).toBe(true);
    expect(events.filter((e) => e.includes('no span'))).toEqual([]);
  });
});
