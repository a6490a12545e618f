import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  MemoryStore,
  StampedeModule,
  StampedeModuleOptions,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { deleteKeys, REDIS_URL, uniquePrefix } from './support/redis';

/** 20,000 characters: a value whose size matters. */
const big = (i: number) => `${i}:`.padEnd(20_000, 'x');

/** What the process keeps grows with methods, not with keys, and within its byte bounds. */
describe('in-process memory is bounded (the Redis of the test run)', () => {
  jest.setTimeout(60_000);
  const prefix = uniquePrefix('bounds');
  let redis: Redis;
  const apps: TestingModule[] = [];

  const start = async (options: StampedeModuleOptions) => {
    const app = await Test.createTestingModule({
      imports: [StampedeModule.forRoot(options)],
    }).compile();
    apps.push(await app.init());
    return app.get(StampedeService);
  };

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await deleteKeys(redis, prefix);
    await redis?.quit();
  });

  it('getOrLoad() without a name counts every key under one name', async () => {
    const stampede = await start({ redis: REDIS_URL, keyPrefix: prefix });
    for (let i = 0; i < 2000; i++) await stampede.getOrLoad(`item:${i}`, () => i, { ttl: 60_000 });
    expect(Object.keys(stampede.metrics())).toEqual(['getOrLoad']);
    expect(stampede.metrics().getOrLoad).toMatchObject({ calls: 2000, loads: 2000 });
  });

  it('the last known values (l1: false) stay within lastKnown.maxBytes', async () => {
    const maxBytes = 1_000_000;
    const stampede = await start({
      redis: REDIS_URL,
      keyPrefix: `${prefix}lk:`,
      lastKnown: { maxBytes },
    });
    for (let i = 0; i < 200; i++)
      await stampede.getOrLoad(`doc:${i}`, () => big(i), { ttl: 60_000 });
    const stats = stampede.lastKnownStats();
    expect(stats.bytes).toBeLessThanOrEqual(maxBytes);
    expect(stats.entries).toBeGreaterThanOrEqual(40); // the most recent, as many as fit
    expect(stats.entries).toBeLessThan(200);
    // Values read from Redis (not only those loaded here) are counted too.
    const reader = await start({
      redis: REDIS_URL,
      keyPrefix: `${prefix}lk:`,
      lastKnown: { maxBytes },
    });
    for (let i = 0; i < 200; i++)
      await reader.getOrLoad(`doc:${i}`, () => 'unused', { ttl: 60_000 });
    expect(reader.metrics().getOrLoad.loads).toBe(0);
    expect(reader.lastKnownStats().bytes).toBeLessThanOrEqual(maxBytes);
    expect(reader.lastKnownStats().entries).toBeGreaterThanOrEqual(40);
  });

  it('the in-memory store stays within memory.maxEntries and memory.maxBytes', async () => {
    const stampede = await start({ memory: { maxEntries: 100, maxBytes: 1_000_000 } });
    for (let i = 0; i < 1000; i++) await stampede.getOrLoad(`n:${i}`, () => i, { ttl: 60_000 });
    const store = stampede.store as MemoryStore;
    expect(store.stats.entries).toBe(100);
    for (let i = 0; i < 200; i++)
      await stampede.getOrLoad(`doc:${i}`, () => big(i), { ttl: 60_000 });
    expect(store.stats.bytes).toBeLessThanOrEqual(1_000_000);
    expect(store.stats.entries).toBeLessThanOrEqual(100);
    // The most recent value is still served from the store.
    let loads = 0;
    expect(await stampede.getOrLoad('doc:199', () => (loads++, 'again'), { ttl: 60_000 })).toBe(
      big(199),
    );
    expect(loads).toBe(0);
  });
});
