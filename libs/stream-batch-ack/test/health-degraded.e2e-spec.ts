import { Controller, Get, INestApplication, Module, Query } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Redis } from 'ioredis';
import {
  RedisStreamsHealthIndicator,
  RedisStreamsHealthModule,
} from '@nest-redis-resilience/stream-batch-ack/health';
import { deleteKeys, randomPrefix, REDIS_URL } from './support/helpers';

jest.setTimeout(60_000);

const prefix = randomPrefix('health-degraded');
const STREAM = `${prefix}orders`;
const GROUP = 'billing';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly streams: RedisStreamsHealthIndicator,
  ) {}

  /** The connection the indicator reads with (an app's own client, as `client`). */
  static redis: Redis;

  /** GET /health?warnLag=3&maxPending=1 ... : the thresholds from the query, for the test. */
  @Get()
  @HealthCheck()
  check(@Query() q: Record<string, string>) {
    const num = (name: string) => (q[name] === undefined ? undefined : Number(q[name]));
    return this.health.check([
      () =>
        this.streams.isHealthy('orders', {
          client: HealthController.redis,
          stream: STREAM,
          group: GROUP,
          maxLag: num('maxLag'),
          maxPending: num('maxPending'),
          warnLag: num('warnLag'),
          warnPending: num('warnPending'),
        }),
    ]);
  }
}

@Module({
  imports: [TerminusModule.forRoot({ logger: false }), RedisStreamsHealthModule],
  controllers: [HealthController],
})
class HealthAppModule {}

describe('RedisStreamsHealthIndicator: degraded above warnLag / warnPending (terminus 12)', () => {
  let redis: Redis;
  let app: INestApplication;
  let url: string;
  let health: RedisStreamsHealthIndicator;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    HealthController.redis = redis;
    // The group "billing" has 6 entries: 2 delivered and not acknowledged (pending), 4 not
    // delivered yet (lag).
    await redis.call('XGROUP', 'CREATE', STREAM, GROUP, '0', 'MKSTREAM');
    for (let n = 0; n < 6; n++) await redis.xadd(STREAM, '*', 'data', JSON.stringify({ n }));
    await redis.xreadgroup('GROUP', GROUP, 'c1', 'COUNT', 2, 'STREAMS', STREAM, '>');

    app = await NestFactory.create(HealthAppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    health = app.get(RedisStreamsHealthIndicator);
  });

  afterAll(async () => {
    await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  const get = async (query: string) => {
    const res = await fetch(`${url}/health?${query}`);
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  it('lag above warnLag (and below maxLag): degraded, with the details and the reason', async () => {
    const result = await health.isHealthy('orders', {
      client: redis,
      stream: STREAM,
      group: GROUP,
      maxLag: 10,
      warnLag: 3,
    });
    expect(result.orders).toEqual({
      status: 'degraded',
      stream: STREAM,
      group: GROUP,
      consumers: 1,
      pending: 2,
      lag: 4,
      lastDeliveredId: expect.any(String),
      message: 'lag 4 > 3 (warnLag)',
    });
  });

  it('GET /health: overall status degraded with HTTP 200; the indicator is under info', async () => {
    const { status, body } = await get('warnLag=3&warnPending=1&maxLag=10&maxPending=10');
    expect(status).toBe(200);
    expect(body.status).toBe('degraded');
    expect(body.info.orders).toMatchObject({
      status: 'degraded',
      pending: 2,
      lag: 4,
      message: 'pending 2 > 1 (warnPending), lag 4 > 3 (warnLag)',
    });
    expect(body.error).toEqual({});
  });

  it('a hard threshold still makes it down (HTTP 503), naming the warnings too', async () => {
    const { status, body } = await get('warnLag=3&maxPending=1');
    expect(status).toBe(503);
    expect(body.status).toBe('error');
    expect(body.error.orders).toMatchObject({
      status: 'down',
      message: 'pending 2 > 1, lag 4 > 3 (warnLag)',
    });
  });

  it('at or below the warning thresholds: up (HTTP 200, status ok)', async () => {
    const { status, body } = await get('warnLag=4&warnPending=2');
    expect(status).toBe(200);
    expect(body.status).toBe('ok');
    expect(body.info.orders).toMatchObject({ status: 'up', pending: 2, lag: 4 });
    expect(body.info.orders.message).toBeUndefined();
  });
});
