import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { RedisStore, StampedeModule, StampedeService } from '@nest-redis-resilience/stampede';
import { REDIS_URL, deleteKeys, uniquePrefix } from './support/redis';

/**
 * An early recomputation (or a grace refresh) holds a lock key of its own while the value stays
 * readable. If the value expires before the refresh fills, a caller of another instance must wait
 * for that refresh, not load the key a second time.
 */
describe('a refresh in flight when its value expires (another instance refreshes)', () => {
  const prefix = uniquePrefix('refresh-in-flight');
  let refresher: RedisStore;
  let app: TestingModule;
  let stampede: StampedeService;
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    refresher = new RedisStore(REDIS_URL, { keyPrefix: prefix, operationTimeout: 5000 });
    await refresher.waitUntilReady();
    app = await Test.createTestingModule({
      imports: [
        StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix: prefix, operationTimeout: 5000 }),
      ],
    }).compile();
    await app.init();
    stampede = app.get(StampedeService);
  });

  afterAll(async () => {
    await app?.close();
    await refresher?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const policy = { ttl: 60_000, lock: { ttl: 5000, wait: 10_000 } };

  it('a caller that finds the value expired waits for the refresh and gets its value: no second load', async () => {
    const read = { v: 'old', d: 10, e: Date.now() + 300 };
    await refresher.set('k1', read, 300);
    // The refresh takes its lock; the value would expire within the lock's TTL, so it is kept.
    expect(await refresher.tryLock('k1', 'refresh-token', 5000, read)).toBe(true);
    await delay(500); // the value's TTL has passed: it is expired, and still in Redis
    expect(await redis.pttl(`${prefix}{k1}`)).toBeGreaterThan(3000);

    let loads = 0;
    const call = stampede.getOrLoad(
      'k1',
      async () => {
        loads++;
        return 'second load';
      },
      policy,
    );
    await delay(300);
    await refresher.fill(
      'k1',
      { v: 'refreshed', d: 10, e: Date.now() + 60_000 },
      60_000,
      'refresh-token',
    );
    expect(await call).toBe('refreshed');
    expect(loads).toBe(0);
    const m = stampede.metrics()['getOrLoad'];
    expect(m.lockWaits).toBeGreaterThanOrEqual(1);
    expect(m.lockWaitMs).toBeLessThan(2000); // woken by the fill, not by the 5 s lock running out
    expect(await redis.exists(`${prefix}{k1}:lock`)).toBe(0);
  });

  it('an expired value still in Redis that nobody refreshes is loaded once, under the refresh lock, which is released', async () => {
    // Expired on the caller's clock, while Redis still holds it (clocks apart, or kept for a
    // refresh that has ended without storing a value).
    await refresher.set('k2', { v: 'old', d: 10, e: Date.now() - 50 }, 60_000);
    let loads = 0;
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        stampede.getOrLoad('k2', async () => `load ${++loads}`, policy),
      ),
    );
    expect(new Set(results)).toEqual(new Set(['load 1']));
    expect(loads).toBe(1);
    expect(await redis.exists(`${prefix}{k2}:lock`)).toBe(0);
    expect(await stampede.getOrLoad('k2', async () => `load ${++loads}`, policy)).toBe('load 1');
  });

  it('an expired value kept for a refresh whose holder died is loaded once the lock expires', async () => {
    const read = { v: 'old', d: 10, e: Date.now() + 100 };
    await refresher.set('k3', read, 100);
    expect(await refresher.tryLock('k3', 'dying-refresh', 1000, read)).toBe(true);
    await delay(200); // expired, kept while the refresh's lock lasts
    let loads = 0;
    const started = Date.now();
    expect(await stampede.getOrLoad('k3', async () => `load ${++loads}`, policy)).toBe('load 1');
    expect(loads).toBe(1);
    // It waited for the refresh until its lock ran out, then loaded.
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
  });
});
