import { Redis } from 'ioredis';
import { RedisStore } from '@nest-redis-resilience/stampede';
import { REDIS_URL, deleteKeys, uniquePrefix } from './support/redis';

describe('RedisStore lock and notification (inspects Redis keys)', () => {
  const prefix = uniquePrefix('store');
  let store: RedisStore;
  let other: RedisStore;
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    store = new RedisStore(REDIS_URL, { keyPrefix: prefix });
    other = new RedisStore(REDIS_URL, { keyPrefix: prefix });
    await Promise.all([store.waitUntilReady(), other.waitUntilReady()]);
  });

  afterAll(async () => {
    await store.close();
    await other.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a lock is never released or extended by someone other than its holder', async () => {
    expect(await store.readOrLock('k1', 'token-a', 5000)).toEqual({ kind: 'locked' });
    const busy = await other.readOrLock('k1', 'token-b', 5000);
    expect(busy.kind).toBe('busy');
    expect(busy.kind === 'busy' && busy.lockTtlMs).toBeGreaterThan(4000);

    expect(await other.unlock('k1', 'token-b')).toBe(false);
    expect(await other.extendLock('k1', 'token-b', 60_000)).toBe(false);
    expect(await redis.get(`${prefix}{k1}:lock`)).toBe('token-a');
    expect(await redis.pttl(`${prefix}{k1}:lock`)).toBeLessThanOrEqual(5000);

    expect(await store.extendLock('k1', 'token-a', 60_000)).toBe(true);
    expect(await redis.pttl(`${prefix}{k1}:lock`)).toBeGreaterThan(5000);
    expect(await store.unlock('k1', 'token-a')).toBe(true);
    expect(await redis.exists(`${prefix}{k1}:lock`)).toBe(0);
  });

  it('fill stores the value, releases the holder lock and wakes waiters of another store', async () => {
    expect(await store.readOrLock('k2', 'token-a', 5000)).toEqual({ kind: 'locked' });
    const watch = other.watch('k2');
    let woken = false;
    void watch.done.then(() => (woken = true));
    await store.fill('k2', { v: { n: 1 }, d: 12, e: Date.now() + 1000 }, 1000, 'token-a');
    for (let i = 0; i < 100 && !woken; i++) await new Promise((r) => setTimeout(r, 5));
    expect(woken).toBe(true);
    watch.cancel();
    expect(await redis.exists(`${prefix}{k2}:lock`)).toBe(0);
    expect(await other.readOrLock('k2', 'token-b', 5000)).toMatchObject({
      kind: 'hit',
      envelope: { v: { n: 1 }, d: 12 },
    });
    expect(await redis.pttl(`${prefix}{k2}`)).toBeGreaterThan(900);
  });

  it('a fill by a holder whose lock expired and was taken does not release the new holder lock', async () => {
    await redis.set(`${prefix}{k3}:lock`, 'token-new', 'PX', 5000);
    await store.fill('k3', { v: 1, d: 1, e: Date.now() + 1000 }, 1000, 'token-old');
    expect(await redis.get(`${prefix}{k3}:lock`)).toBe('token-new');
  });

  it('a value that is not an envelope is a miss, and is replaced', async () => {
    await redis.set(`${prefix}{k4}`, 'not json');
    expect(await store.get('k4')).toBeUndefined();
    expect(await store.readOrLock('k4', 'token-a', 5000)).toEqual({ kind: 'locked' });
  });
});
