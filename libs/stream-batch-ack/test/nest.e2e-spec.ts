import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Idempotent,
  RedisStreamsContext,
  RedisStreamsModule,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
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
  startMicroservice,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('nest');
const ORDERS = `${prefix}orders`;
const GROUP = 'billing';

const charged: string[] = [];
const failOnce = new Set<string>(['o-3']);

@Controller()
class BillingController {
  @StreamEventPattern(ORDERS)
  @Idempotent({ key: (order: { orderId: string }) => order.orderId, ttlMs: 60_000 })
  charge(@Payload() order: { orderId: string }, @Ctx() _ctx: RedisStreamsContext) {
    if (failOnce.delete(order.orderId)) throw new Error('payment gateway timeout');
    charged.push(order.orderId);
  }
}

describe('Nest integration: @Idempotent() and RedisStreamsHealthIndicator', () => {
  let redis: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app, server } = await startMicroservice(
      {
        imports: [RedisStreamsModule.forRoot()],
        controllers: [BillingController],
      },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        claim: { minIdleMs: 100, intervalMs: 50 },
        idempotency: { store: 'redis', keyPrefix: `${prefix}idem:` },
      },
    ));
  });

  afterAll(async () => {
    await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('duplicates of a processed key are skipped and acked; a failed run is forgotten so its retry runs', async () => {
    await produce(redis, ORDERS, [
      { orderId: 'o-1' },
      { orderId: 'o-2' },
      { orderId: 'o-1' },
      { orderId: 'o-3' },
      { orderId: 'o-2' },
      { orderId: 'o-1' },
    ]);
    await waitFor('o-1, o-2, o-3 charged', () => charged.length === 3, 10_000);
    await waitFor('nothing pending', async () => (await pendingCount(redis, ORDERS, GROUP)) === 0);
    expect([...charged].sort()).toEqual(['o-1', 'o-2', 'o-3']);
    expect(await redis.get(`${prefix}idem:${GROUP}:o-1`)).toBe('done');
    expect(await redis.xlen(`${ORDERS}:dlq`)).toBe(0);
  });

  it('the health indicator reports lag and pending against thresholds, and down when the group or connection is missing', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisStreamsHealthModule],
    }).compile();
    const health = moduleRef.get(RedisStreamsHealthIndicator);

    const up = await health.isHealthy('orders', {
      client: server,
      stream: ORDERS,
      group: GROUP,
      maxPending: 10,
      maxLag: 10,
    });
    expect(up.orders).toMatchObject({
      status: 'up',
      pending: 0,
      lag: 0,
      stream: ORDERS,
      group: GROUP,
    });

    // a second group that lags 6 entries behind, with 2 pending
    await redis.call('XGROUP', 'CREATE', ORDERS, 'reports', '0');
    await redis.xreadgroup('GROUP', 'reports', 'r', 'COUNT', 2, 'STREAMS', ORDERS, '>');
    const own = new Redis(REDIS_URL);
    try {
      await own.ping();
      const down = await health.isHealthy('reports', {
        client: own,
        stream: ORDERS,
        group: 'reports',
        maxPending: 1,
        maxLag: 3,
      });
      expect(down.reports).toMatchObject({ status: 'down', pending: 2, lag: 4 });
      expect(String(down.reports.message)).toContain('pending 2 > 1');

      const missing = await health.isHealthy('x', { client: own, stream: ORDERS, group: 'nope' });
      expect(missing.x.status).toBe('down');
      await own.quit();
      const closed = await health.isHealthy('y', { client: own, stream: ORDERS, group: GROUP });
      expect(closed.y).toMatchObject({ status: 'down' });
      expect(String(closed.y.message)).toMatch(/closed|Redis connection is/);
    } finally {
      if (own.status === 'ready') await own.quit();
      await moduleRef.close();
    }
  });
});
