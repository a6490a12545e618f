import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  SingleFlight,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import {
  StampedeHealthIndicator,
  StampedeHealthModule,
} from '@nest-redis-resilience/stampede/health';
import { ThrowawayRedis, delay } from './support/redis';

@Injectable()
class UserService {
  loads = 0;

  @Cacheable({ key: (id: number) => `user:${id}`, ttl: 60_000 })
  @SingleFlight()
  @DistLock({ ttl: 2000, poll: 5 })
  async find(id: number): Promise<{ id: number; name: string }> {
    this.loads++;
    await delay(5);
    return { id, name: `user-${id}` };
  }
}

describe('Redis stopped and restarted (a redis-server of this test)', () => {
  jest.setTimeout(60_000);
  let server: ThrowawayRedis;
  let moduleRef: TestingModule;
  let users: UserService;
  let health: StampedeHealthIndicator;

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    moduleRef = await Test.createTestingModule({
      imports: [
        // Generous: on a busy machine a slow reply must not pass for an outage before the stop.
        StampedeModule.forRoot({ redis: server.url, operationTimeout: 1000 }),
        StampedeHealthModule,
      ],
      providers: [UserService],
    }).compile();
    await moduleRef.init();
    users = moduleRef.get(UserService);
    health = moduleRef.get(StampedeHealthIndicator);
  });

  afterAll(async () => {
    await moduleRef.close();
    await server.destroy();
  });

  it('answers through the loader while Redis is down, reports down, and caches again once Redis is back', async () => {
    expect(await users.find(1)).toEqual({ id: 1, name: 'user-1' });
    expect(await users.find(1)).toEqual({ id: 1, name: 'user-1' });
    expect(users.loads).toBe(1);
    expect(await health.isHealthy('cache')).toMatchObject({
      cache: { status: 'up', store: 'redis' },
    });

    await server.stop();

    // Every call still answers, each within a bounded time. The value this process read before
    // (TTL 60 s) is what Redis would answer: it is served without a load.
    const before = users.loads;
    for (let i = 0; i < 20; i++) {
      const started = Date.now();
      expect(await users.find(1)).toEqual({ id: 1, name: 'user-1' });
      expect(Date.now() - started).toBeLessThan(1500);
    }
    expect(users.loads - before).toBe(0);
    // A key this process has not seen: concurrent callers share one load, and later calls
    // are served that value until its TTL (the backend does not absorb the outage).
    const concurrent = await Promise.all(Array.from({ length: 100 }, () => users.find(2)));
    expect(concurrent.every((u) => u.name === 'user-2')).toBe(true);
    for (let i = 0; i < 10; i++) expect(await users.find(2)).toEqual({ id: 2, name: 'user-2' });
    expect(users.loads - before).toBe(1);

    const started = Date.now();
    const down = await health.isHealthy('cache', { timeout: 500 });
    expect(Date.now() - started).toBeLessThan(1500);
    expect(down).toMatchObject({ cache: { status: 'down', store: 'redis' } });
    expect(
      moduleRef.get(StampedeService).metrics()['UserService.find'].storeErrors,
    ).toBeGreaterThan(0);

    await server.start();
    let status = 'down';
    for (let i = 0; i < 100 && status !== 'up'; i++) {
      await delay(100);
      status = (await health.isHealthy('cache', { timeout: 500 })).cache.status;
    }
    expect(status).toBe('up');
    await delay(1100); // past the store's cool-down

    const loadsBeforeResume = users.loads;
    expect(await users.find(3)).toEqual({ id: 3, name: 'user-3' });
    expect(await users.find(3)).toEqual({ id: 3, name: 'user-3' });
    expect(users.loads - loadsBeforeResume).toBe(1);
    const direct = new Redis(server.url);
    expect(await direct.exists('stampede:{user:3}')).toBe(1);
    await direct.quit();
  });
});
