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
    // A generous operation timeout: on a busy machine a SUBSCRIBE may take longer than the 500 ms
    // default, and this spec inspects what happens, not how fast.
    store = new RedisStore(REDIS_URL, { keyPrefix: prefix, operationTimeout: 5000 });
    other = new RedisStore(REDIS_URL, { keyPrefix: prefix, operationTimeout: 5000 });
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
    // A first attempt only learns that the lock is held...
    expect(await other.readOrLock('k1', 'token-b', 5000)).toEqual({ kind: 'busy', lockTtlMs: -1 });
    // ...a waiting one marks it as waited for and learns how long it has left.
    const busy = await other.readOrLock('k1', 'token-b', 5000, true);
    expect(busy.kind).toBe('busy');
    expect(busy.kind === 'busy' && busy.lockTtlMs).toBeGreaterThan(4000);
    expect(await redis.get(`${prefix}{k1}:lock`)).toBe('token-a|w');

    expect(await other.unlock('k1', 'token-b')).toBe(false);
    expect(await other.extendLock('k1', 'token-b', 60_000)).toBe(false);
    expect(await redis.get(`${prefix}{k1}:lock`)).toBe('token-a|w');
    expect(await redis.pttl(`${prefix}{k1}:lock`)).toBeLessThanOrEqual(5000);

    expect(await store.extendLock('k1', 'token-a', 60_000)).toBe(true);
    expect(await redis.pttl(`${prefix}{k1}:lock`)).toBeGreaterThan(5000);
    expect(await store.unlock('k1', 'token-a')).toBe(true);
    expect(await redis.exists(`${prefix}{k1}:lock`)).toBe(0);
  });

  it('fill stores the value, releases the holder lock and wakes the waiters of another store', async () => {
    expect(await store.readOrLock('k2', 'token-a', 5000)).toEqual({ kind: 'locked' });
    const watch = other.watch('k2');
    expect(await watch.ready).toBe(true);
    expect((await other.readOrLock('k2', 'token-b', 5000, true)).kind).toBe('busy');
    let woken = false;
    void watch.done.then(() => (woken = true));
    const before = other.notificationsReceived;
    await store.fill('k2', { v: { n: 1 }, d: 12, e: Date.now() + 1000 }, 1000, 'token-a');
    for (let i = 0; i < 200 && !woken; i++) await new Promise((r) => setTimeout(r, 5));
    expect(woken).toBe(true);
    expect(other.notificationsReceived).toBe(before + 1);
    watch.cancel();
    // The lock holds no token any more, only a short mark that a fill just happened.
    expect(await redis.get(`${prefix}{k2}:lock`)).toBe('|filled');
    expect(await redis.pttl(`${prefix}{k2}:lock`)).toBeLessThanOrEqual(250);
    // A caller that missed just before the fill finds the lock taken, then reads the value.
    expect((await other.readOrLock('k2', 'token-b', 5000)).kind).toBe('busy');
    expect(await other.readOrLock('k2', 'token-b', 5000, true)).toMatchObject({
      kind: 'hit',
      envelope: { v: { n: 1 }, d: 12 },
    });
    expect(await redis.pttl(`${prefix}{k2}`)).toBeGreaterThan(0); // the value, with its TTL
  });

  it('a fill nobody waits for notifies nobody, even an instance watching that key', async () => {
    const watch = other.watch('k5');
    expect(await watch.ready).toBe(true);
    const before = other.notificationsReceived;
    expect(await store.readOrLock('k5', 'token-a', 5000)).toEqual({ kind: 'locked' });
    await store.fill('k5', { v: 5, d: 1, e: Date.now() + 1000 }, 1000, 'token-a');
    // A marked lock is notified: the notification arrives after the unmarked fill's would have.
    expect(await store.readOrLock('k5b', 'token-a', 5000)).toEqual({ kind: 'locked' });
    const marker = other.watch('k5b');
    expect(await marker.ready).toBe(true);
    expect((await other.readOrLock('k5b', 'token-b', 5000, true)).kind).toBe('busy');
    await store.fill('k5b', { v: 5, d: 1, e: Date.now() + 1000 }, 1000, 'token-a');
    await marker.done;
    expect(other.notificationsReceived).toBe(before + 1);
    watch.cancel();
    marker.cancel();
  });

  it('a fill by a holder whose lock expired stores its value and leaves no lock behind', async () => {
    await redis.set(`${prefix}{k3}:lock`, 'token-new', 'PX', 5000);
    await store.fill('k3', { v: 1, d: 1, e: Date.now() + 1000 }, 1000, 'token-old');
    // The fresh value answers every caller; no caller waits on a lock for it.
    expect(await other.readOrLock('k3', 'token-c', 5000, true)).toMatchObject({
      kind: 'hit',
      envelope: { v: 1 },
    });
    expect(await redis.get(`${prefix}{k3}:lock`)).toBe('|filled');
  });

  it('a FILLED mark whose value is gone (invalidated, expired) does not hold anyone up', async () => {
    expect(await store.readOrLock('k7', 'token-a', 5000)).toEqual({ kind: 'locked' });
    await store.fill('k7', { v: 1, d: 1, e: Date.now() + 60_000 }, 60_000, 'token-a');
    await redis.del(`${prefix}{k7}`); // gone, as after an expiry; the mark is still there
    expect((await other.readOrLock('k7', 'token-b', 5000)).kind).toBe('busy');
    expect(await other.readOrLock('k7', 'token-b', 5000, true)).toEqual({ kind: 'locked' });
    expect(await redis.get(`${prefix}{k7}:lock`)).toBe('token-b');
    // invalidate() drops the mark with the value: the next first attempt takes the lock.
    await store.fill('k8', { v: 1, d: 1, e: Date.now() + 60_000 }, 60_000, 'token-a');
    await store.invalidate('k8');
    expect(await redis.exists(`${prefix}{k8}:lock`)).toBe(0);
    expect(await other.readOrLock('k8', 'token-b', 5000)).toEqual({ kind: 'locked' });
  });

  it('an early-recomputation lock is refused when the value was refreshed since it was read', async () => {
    const read = { v: 'old', d: 10, e: Date.now() + 1000 };
    await store.set('k6', read, 1000);
    const refreshed = { v: 'new', d: 10, e: Date.now() + 2000 };
    await other.set('k6', refreshed, 2000);
    expect(await store.tryLock('k6', 'token-a', 5000, read)).toBe(false);
    expect(await redis.exists(`${prefix}{k6}:lock`)).toBe(0);
    expect(await store.tryLock('k6', 'token-a', 5000, refreshed)).toBe(true);
    expect(await store.unlock('k6', 'token-a')).toBe(true);
  });

  it('a value that is not an envelope is a miss, and is replaced', async () => {
    await redis.set(`${prefix}{k4}`, 'not json');
    expect(await store.get('k4')).toBeUndefined();
    expect(await store.readOrLock('k4', 'token-a', 5000)).toEqual({ kind: 'locked' });
  });
});
