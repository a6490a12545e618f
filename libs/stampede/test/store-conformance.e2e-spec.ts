import { createCache } from 'cache-manager';
import { Cluster, Redis } from 'ioredis';
import {
  CacheManagerStore,
  type Envelope,
  MemoryStore,
  type ReadOrLockResult,
  RedisStore,
  StampedeStore,
} from '@nest-redis-resilience/stampede';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import { waitFor } from '../../../test/support/wait';
import { deleteKeys, REDIS_URL, uniquePrefix } from './support/redis';

/**
 * One set of cases, run against every store: what the flow relies on from a value store and a
 * lock store, whatever the backend.
 */
interface Subject {
  store: StampedeStore;
  /** Writes a text that is not an envelope under `key`, as a foreign writer would. */
  writeForeign(key: string, text: string): Promise<void>;
  close(): Promise<void>;
}

const subjects: [string, () => Promise<Subject>][] = [
  [
    'memory',
    async () => {
      const store = new MemoryStore();
      return {
        store,
        writeForeign: async () => undefined, // values never leave the store as text
        close: () => store.close(),
      };
    },
  ],
  [
    'cache-manager',
    async () => {
      const cache = createCache();
      const store = new CacheManagerStore(cache);
      return {
        store,
        writeForeign: async (key, text) => void (await cache.set(key, text, 60_000)),
        close: async () => {
          await store.close();
          await cache.disconnect();
        },
      };
    },
  ],
  [
    'redis',
    async () => {
      const prefix = uniquePrefix('conformance');
      const store = new RedisStore(REDIS_URL, { keyPrefix: prefix, operationTimeout: 5000 });
      await store.waitUntilReady(10_000);
      const admin = new Redis(REDIS_URL);
      return {
        store,
        writeForeign: async (key, text) => void (await admin.set(store.keys.value(key), text)),
        close: async () => {
          await deleteKeys(admin, prefix);
          admin.disconnect();
          await store.close();
        },
      };
    },
  ],
  [
    'redis cluster (a throwaway 3-node cluster)',
    async () => {
      const cluster = await ThrowawayCluster.start();
      const client = new Cluster(cluster.nodes);
      const store = new RedisStore(client, { keyPrefix: 'conformance:', operationTimeout: 5000 });
      await store.waitUntilReady(10_000);
      return {
        store,
        writeForeign: async (key, text) => void (await client.set(store.keys.value(key), text)),
        close: async () => {
          await store.close();
          await client.quit();
          await cluster.destroy();
        },
      };
    },
  ],
];

const envelope = (v: unknown, ttlMs = 60_000): Envelope => ({ v, d: 5, e: Date.now() + ttlMs });

/** Asserts that a lock attempt took the lock; returns the token to fill, unlock or extend it with. */
function lockTaken(step: ReadOrLockResult, token: string): string {
  expect(step.kind).toBe('locked');
  return (step.kind === 'locked' && step.token) || token;
}

describe.each(subjects)('store conformance: %s', (_name, make) => {
  let subject: Subject;
  let store: StampedeStore;
  let n = 0;
  let key: string;

  beforeAll(async () => {
    subject = await make();
    store = subject.store;
  }, 60_000);
  afterAll(() => subject.close(), 30_000);
  beforeEach(() => {
    key = `item:${++n}`;
  });

  it('get of a missing key is undefined; set, get and delete round-trip a copy', async () => {
    expect(await store.get(key)).toBeUndefined();
    const value = { id: 1, tags: ['a'] };
    await store.set(key, envelope(value), 60_000);
    const read = await store.get<typeof value>(key);
    expect(read).toMatchObject({ v: value, d: 5 });
    read!.v.id = 2; // a copy: changing it changes nothing stored
    expect((await store.get<typeof value>(key))!.v.id).toBe(1);
    await store.delete(key);
    expect(await store.get(key)).toBeUndefined();
  });

  it('a value is gone once its TTL passes', async () => {
    await store.set(key, envelope('v'), 100);
    await waitFor('the value to expire', async () => (await store.get(key)) === undefined);
  });

  it('a foreign or corrupt text is a miss', async () => {
    await subject.writeForeign(key, 'not an envelope');
    expect(await store.get(key)).toBeUndefined();
  });

  it('getMany: the envelopes of many keys in their order, misses and foreign texts undefined', async () => {
    const keys = Array.from({ length: 20 }, (_, i) => `${key}:${i}`);
    for (const [i, k] of keys.entries()) if (i % 3 === 0) await store.set(k, envelope(i), 60_000);
    await subject.writeForeign(keys[1], 'not an envelope');
    const read = await store.getMany!<number>([...keys, keys[0]]);
    expect(read.map((e) => e?.v)).toEqual([
      ...keys.map((_, i) => (i % 3 === 0 ? i : undefined)),
      0,
    ]);
    expect(await store.getMany!([])).toEqual([]);
  });

  it('readOrLock: the value if there is one, else the lock, else busy', async () => {
    const a = lockTaken(await store.readOrLock(key, 'a', 60_000), 'a');
    const busy = await store.readOrLock(key, 'b', 60_000);
    expect(busy.kind).toBe('busy');
    await store.fill(key, envelope('v'), 60_000, a);
    // A first attempt just after a fill may find the lock taken; a waiting attempt reads the value.
    expect((await store.readOrLock<string>(key, 'c', 60_000)).kind).not.toBe('locked');
    const watch = store.watch(key);
    await watch.ready;
    const hit = await store.readOrLock<string>(key, 'c', 60_000, true);
    watch.cancel();
    expect(hit.kind === 'hit' && hit.envelope.v).toBe('v');
  });

  it('a lock expires after its TTL; extend keeps it, only for its holder', async () => {
    const a = lockTaken(await store.readOrLock(key, 'a', 300), 'a');
    expect(await store.extendLock(key, 'b', 60_000)).toBe(false);
    expect(await store.extendLock(key, a, 60_000)).toBe(true);
    expect(await store.tryLock(key, 'b', 60_000)).toBe(false);
    const other = `${key}:short`;
    expect(await store.tryLock(other, 'a', 100)).toBe(true);
    await waitFor('the lock to expire', () => store.tryLock(other, 'b', 60_000));
  });

  it('unlock releases only the holder lock', async () => {
    expect(await store.tryLock(key, 'a', 60_000)).toBe(true);
    expect(await store.unlock(key, 'b')).toBe(false);
    expect(await store.tryLock(key, 'b', 60_000)).toBe(false);
    expect(await store.unlock(key, 'a')).toBe(true);
    expect(await store.tryLock(key, 'b', 60_000)).toBe(true);
  });

  it('tryLock with the value read: declined once someone else refreshed it', async () => {
    const read = envelope('v1');
    await store.set(key, read, 60_000);
    const current = (await store.get(key))!;
    await store.set(key, envelope('v2', 30_000), 60_000);
    expect(await store.tryLock(key, 'a', 60_000, current)).toBe(false);
    expect(await store.tryLock(key, 'a', 60_000, (await store.get(key))!)).toBe(true);
  });

  it('fill with the token stores the value, releases the lock and wakes a waiter', async () => {
    const holder = lockTaken(await store.readOrLock(key, 'holder', 60_000), 'holder');
    const watch = store.watch(key);
    expect(await watch.ready).toBe(true);
    // A waiting attempt registers this process as a waiter, so the fill notifies it.
    expect((await store.readOrLock(key, 'waiter', 60_000, true)).kind).toBe('busy');
    await store.fill(key, envelope('filled'), 60_000, holder);
    await watch.done;
    expect((await store.get(key))?.v).toBe('filled');
    // Released: nobody is held up by it, and once the value is gone the next caller locks.
    expect((await store.readOrLock(key, 'next', 60_000, true)).kind).toBe('hit');
    await store.delete(key);
    lockTaken(await store.readOrLock(key, 'next', 60_000, true), 'next');
    watch.cancel();
  });

  it('unlock without a value wakes a waiter too (the holder gave up)', async () => {
    const holder = lockTaken(await store.readOrLock(key, 'holder', 60_000), 'holder');
    const watch = store.watch(key);
    await watch.ready;
    expect((await store.readOrLock(key, 'waiter', 60_000, true)).kind).toBe('busy');
    expect(await store.unlock(key, 'b')).toBe(false);
    expect(await store.unlock(key, holder)).toBe(true);
    await watch.done;
    watch.cancel();
    lockTaken(await store.readOrLock(key, 'waiter', 60_000), 'waiter');
  });

  it('fill without a token stores the value and leaves a lock alone', async () => {
    expect(await store.tryLock(key, 'holder', 60_000)).toBe(true);
    await store.fill(key, envelope('v'), 60_000);
    expect((await store.get(key))?.v).toBe('v');
    expect(await store.tryLock(key, 'other', 60_000)).toBe(false);
  });

  it('notifications are live, and the backend answers a ping', async () => {
    expect(store.notificationsLive()).toBe(true);
    await expect(store.ping()).resolves.toBeUndefined();
  });
});
