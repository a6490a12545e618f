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

  /** The lock of a miss: a mark in the value key (NUL, `lock:`, the holder's token). */
  const mark = (token: string) => `\u0000lock:${token}`;
  const locked = (token: string) => ({ kind: 'locked', token: mark(token) });

  it('a lock is never released or extended by someone other than its holder', async () => {
    expect(await store.readOrLock('k1', 'token-a', 5000)).toEqual(locked('token-a'));
    // The lock is the value key itself: a read finds no value.
    expect(await other.get('k1')).toBeUndefined();
    // A first attempt only learns that the lock is held...
    expect(await other.readOrLock('k1', 'token-b', 5000)).toEqual({ kind: 'busy', lockTtlMs: -1 });
    // ...a waiting one marks it as waited for and learns how long it has left.
    const busy = await other.readOrLock('k1', 'token-b', 5000, true);
    expect(busy.kind).toBe('busy');
    expect(busy.kind === 'busy' && busy.lockTtlMs).toBeGreaterThan(4000);
    expect(await redis.get(`${prefix}{k1}`)).toBe(`${mark('token-a')}|w`);
    expect(await redis.exists(`${prefix}{k1}:lock`)).toBe(0);

    expect(await other.unlock('k1', mark('token-b'))).toBe(false);
    expect(await other.extendLock('k1', mark('token-b'), 60_000)).toBe(false);
    expect(await redis.get(`${prefix}{k1}`)).toBe(`${mark('token-a')}|w`);
    expect(await redis.pttl(`${prefix}{k1}`)).toBeLessThanOrEqual(5000);

    expect(await store.extendLock('k1', mark('token-a'), 60_000)).toBe(true);
    expect(await redis.pttl(`${prefix}{k1}`)).toBeGreaterThan(5000);
    expect(await store.unlock('k1', mark('token-a'))).toBe(true);
    expect(await redis.exists(`${prefix}{k1}`)).toBe(0);
  });

  it('fill replaces the lock with the value in one command and wakes the waiters of another store', async () => {
    expect(await store.readOrLock('k2', 'token-a', 5000)).toEqual(locked('token-a'));
    const watch = other.watch('k2');
    expect(await watch.ready).toBe(true);
    expect((await other.readOrLock('k2', 'token-b', 5000, true)).kind).toBe('busy');
    let woken = false;
    void watch.done.then(() => (woken = true));
    const before = other.notificationsReceived;
    await store.fill('k2', { v: { n: 1 }, d: 12, e: Date.now() + 1000 }, 1000, mark('token-a'));
    for (let i = 0; i < 200 && !woken; i++) await new Promise((r) => setTimeout(r, 5));
    expect(woken).toBe(true);
    expect(other.notificationsReceived).toBe(before + 1);
    watch.cancel();
    expect(await redis.exists(`${prefix}{k2}:lock`)).toBe(0);
    // A caller that missed just before the fill finds the key taken, then reads the value.
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
    expect(await store.readOrLock('k5', 'token-a', 5000)).toEqual(locked('token-a'));
    await store.fill('k5', { v: 5, d: 1, e: Date.now() + 1000 }, 1000, mark('token-a'));
    // A marked lock is notified: the notification arrives after the unmarked fill's would have.
    expect(await store.readOrLock('k5b', 'token-a', 5000)).toEqual(locked('token-a'));
    const marker = other.watch('k5b');
    expect(await marker.ready).toBe(true);
    expect((await other.readOrLock('k5b', 'token-b', 5000, true)).kind).toBe('busy');
    await store.fill('k5b', { v: 5, d: 1, e: Date.now() + 1000 }, 1000, mark('token-a'));
    await marker.done;
    expect(other.notificationsReceived).toBe(before + 1);
    watch.cancel();
    marker.cancel();
  });

  it("a fill by a holder whose lock expired stores its value and wakes the next holder's waiters", async () => {
    // token-old's lock expired and token-new took the key; another store waits for token-new.
    await redis.set(`${prefix}{k3}`, `${mark('token-new')}|w`, 'PX', 5000);
    const watch = other.watch('k3');
    expect(await watch.ready).toBe(true);
    await store.fill('k3', { v: 1, d: 1, e: Date.now() + 1000 }, 1000, mark('token-old'));
    await watch.done;
    watch.cancel();
    // The fresh value answers every caller; no caller waits on a lock for it.
    expect(await other.readOrLock('k3', 'token-c', 5000, true)).toMatchObject({
      kind: 'hit',
      envelope: { v: 1 },
    });
  });

  it('a lock whose value is gone (expired, deleted) is taken by the next waiting attempt', async () => {
    expect(await store.readOrLock('k7', 'token-a', 5000)).toEqual(locked('token-a'));
    await redis.del(`${prefix}{k7}`); // the holder's lock expired
    expect(await other.readOrLock('k7', 'token-b', 5000, true)).toEqual(locked('token-b'));
    expect(await redis.get(`${prefix}{k7}`)).toBe(mark('token-b'));
  });

  it('delete() drops a value but not a lock: two callers that found the same invalidated value drop it in turn', async () => {
    await store.fill('k9', { v: 1, d: 1, e: Date.now() + 60_000 }, 60_000);
    await store.delete('k9'); // the first caller drops it...
    expect(await store.readOrLock('k9', 'token-a', 5000)).toEqual(locked('token-a'));
    await other.delete('k9'); // ...the second drops it too, after the first took the lock
    expect(await redis.get(`${prefix}{k9}`)).toBe(mark('token-a'));
    expect((await other.readOrLock('k9', 'token-b', 5000)).kind).toBe('busy');
  });

  it('invalidate() deletes a value but keeps a lock (its holder fills next)', async () => {
    await store.fill('k8', { v: 1, d: 1, e: Date.now() + 60_000 }, 60_000);
    await store.invalidate('k8');
    expect(await redis.exists(`${prefix}{k8}`)).toBe(0);
    expect(await other.readOrLock('k8', 'token-b', 5000)).toEqual(locked('token-b'));
    await store.invalidate('k8');
    expect(await redis.get(`${prefix}{k8}`)).toBe(mark('token-b'));
  });

  it('an early recomputation locks a key of its own, refused when the value was refreshed since it was read', async () => {
    const read = { v: 'old', d: 10, e: Date.now() + 1000 };
    await store.set('k6', read, 1000);
    const refreshed = { v: 'new', d: 10, e: Date.now() + 2000 };
    await other.set('k6', refreshed, 2000);
    expect(await store.tryLock('k6', 'token-a', 5000, read)).toBe(false);
    expect(await redis.exists(`${prefix}{k6}:lock`)).toBe(0);
    expect(await store.tryLock('k6', 'token-a', 5000, refreshed)).toBe(true);
    expect(await redis.get(`${prefix}{k6}:lock`)).toBe('token-a');
    // The value stays readable while it refreshes; the refresh's fill drops its lock key.
    expect(await other.get('k6')).toMatchObject({ v: 'new' });
    await store.fill('k6', { v: 'newer', d: 10, e: Date.now() + 2000 }, 2000, 'token-a');
    expect(await redis.exists(`${prefix}{k6}:lock`)).toBe(0);
    expect(await other.get('k6')).toMatchObject({ v: 'newer' });
  });

  it('a refresh attempt made with a value read before another fill leaves the new value its TTL', async () => {
    const read = { v: 'old', d: 10, e: Date.now() + 1000 };
    await store.set('k10', read, 1000);
    // Another instance refreshed it meanwhile, for a minute.
    await other.fill('k10', { v: 'new', d: 10, e: Date.now() + 60_000 }, 60_000);
    expect(await store.tryLock('k10', 'token-a', 5000, read)).toBe(false);
    expect(await redis.pttl(`${prefix}{k10}`)).toBeGreaterThan(50_000);
    // The holder of the refresh's lock keeps the value it read while it loads.
    const near = { v: 'near', d: 10, e: Date.now() + 1000 };
    await store.set('k10', near, 1000);
    expect(await store.tryLock('k10', 'token-b', 5000, near)).toBe(true);
    await store.get('k10'); // after the PEXPIRE, sent on the same connection
    expect(await redis.pttl(`${prefix}{k10}`)).toBeGreaterThan(3000);
  });

  it('a value that is not an envelope is a miss, and is replaced', async () => {
    await redis.set(`${prefix}{k4}`, 'not json');
    expect(await store.get('k4')).toBeUndefined();
    expect(await store.readOrLock('k4', 'token-a', 5000)).toEqual({ kind: 'busy', lockTtlMs: -1 });
    expect(await store.readOrLock('k4', 'token-a', 5000, true)).toEqual(locked('token-a'));
  });
});
