import {
  Controller,
  DynamicModule,
  Get,
  INestApplication,
  Injectable,
  Module,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Redis } from 'ioredis';
import { Cacheable, StampedeModule, StampedeService } from '@nest-redis-resilience/stampede';
import {
  StampedeHealthIndicator,
  StampedeHealthModule,
} from '@nest-redis-resilience/stampede/health';
import { REDIS_URL, ThrowawayRedis, deleteKeys, uniquePrefix } from './support/redis';
import { waitFor } from '../../../test/support/wait';

jest.setTimeout(60_000);

/** The backend behind the cached methods. */
const backend = { loads: 0, failing: false };

@Injectable()
class RatesService {
  @Cacheable({ key: (pair: string) => `rate:${pair}`, ttl: 200, grace: 60_000, graceBackoff: 50 })
  async rate(pair: string): Promise<{ pair: string; load: number }> {
    const load = ++backend.loads;
    if (backend.failing) throw new Error('rates backend down');
    return { pair, load };
  }
}

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly cache: StampedeHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.cache.isHealthy('cache', { timeout: 2000 })]);
  }
}

function appModule(stampede: DynamicModule) {
  @Module({
    imports: [TerminusModule.forRoot({ logger: false }), stampede, StampedeHealthModule],
    controllers: [HealthController],
    providers: [RatesService],
  })
  class AppModule {}
  return AppModule;
}

async function startApp(stampede: DynamicModule): Promise<{ app: INestApplication; url: string }> {
  const app = await NestFactory.create(appModule(stampede), { logger: false });
  await app.listen(0, '127.0.0.1');
  return { app, url: (await app.getUrl()).replace('[::1]', '127.0.0.1') };
}

async function getHealth(url: string) {
  const res = await fetch(`${url}/health`);
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe('StampedeHealthIndicator: degraded during the cool-down after a timeout (terminus 12)', () => {
  let server: ThrowawayRedis;
  let admin: Redis;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    admin = new Redis(server.url);
    ({ app, url } = await startApp(
      // A cool-down far longer than the test: once entered, it lasts.
      StampedeModule.forRoot({ redis: server.url, operationTimeout: 200, cooldown: 60_000 }),
    ));
  });

  afterAll(async () => {
    await app?.close();
    await admin?.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    await admin?.quit();
    await server?.destroy();
  });

  it('up; a call that times out puts the store in its cool-down: degraded (HTTP 200) while Redis answers pings', async () => {
    const before = await getHealth(url);
    expect(before.status).toBe(200);
    expect(before.body).toMatchObject({ status: 'ok', info: { cache: { status: 'up' } } });
    expect(before.body.info.cache.cooldownMs).toBeUndefined();

    // Writes (and scripts) wait; PING does not. The call's script times out after 200 ms.
    await admin.call('CLIENT', 'PAUSE', '30000', 'WRITE');
    const rates = app.get(RatesService);
    expect(await rates.rate('EURUSD')).toMatchObject({ pair: 'EURUSD' }); // from the loader
    expect(app.get(StampedeService).metrics()['RatesService.rate'].storeErrors).toBeGreaterThan(0);
    await admin.call('CLIENT', 'UNPAUSE');

    const during = await getHealth(url);
    expect(during.status).toBe(200);
    expect(during.body.status).toBe('degraded');
    expect(during.body.info.cache).toMatchObject({
      status: 'degraded',
      store: 'redis',
      message: expect.stringContaining('(cooldown)'),
    });
    expect(during.body.info.cache.cooldownMs).toBeGreaterThan(0);
    expect(during.body.info.cache.cooldownMs).toBeLessThanOrEqual(60_000);
    expect(during.body.error).toEqual({});
  });
});

describe('StampedeHealthIndicator: degraded while values are served stale after failed refreshes (fail-safe)', () => {
  const prefix = uniquePrefix('health-degraded');
  let redis: Redis;
  let app: INestApplication;
  let url: string;
  let failSafes = 0;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app, url } = await startApp(
      StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix, operationTimeout: 5000 }),
    ));
    app.get(StampedeService).on('stampede.failsafe', () => failSafes++);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('degraded (HTTP 200) from the first failed refresh until a refresh succeeds, then up', async () => {
    const rates = app.get(RatesService);
    backend.loads = 0;
    backend.failing = false;
    expect(await rates.rate('GBPUSD')).toEqual({ pair: 'GBPUSD', load: 1 });
    expect((await getHealth(url)).body.status).toBe('ok');

    backend.failing = true;
    // Past the TTL each call gets the stale value and starts a refresh, which fails.
    await waitFor('a failed refresh within grace', async () => {
      expect(await rates.rate('GBPUSD')).toEqual({ pair: 'GBPUSD', load: 1 });
      return failSafes > 0;
    });
    const during = await getHealth(url);
    expect(during.status).toBe(200);
    expect(during.body.status).toBe('degraded');
    expect(during.body.info.cache).toMatchObject({
      status: 'degraded',
      failSafe: { keys: 1, methods: ['RatesService.rate'] },
      message: expect.stringContaining('served stale because their refresh failed (fail-safe)'),
    });
    expect(during.body.info.cache.failSafe.forMs).toBeGreaterThanOrEqual(0);

    backend.failing = false;
    await waitFor('a refresh that succeeds', async () => {
      await rates.rate('GBPUSD');
      return (await rates.rate('GBPUSD')).load > 1;
    });
    const after = await getHealth(url);
    expect(after.status).toBe(200);
    expect(after.body.status).toBe('ok');
    expect(after.body.info.cache.status).toBe('up');
    expect(after.body.info.cache.failSafe).toBeUndefined();
  });
});
