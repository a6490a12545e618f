import { settle, stages } from '../../test/support/stages';
import { StampedeSerializationError } from './errors';
import type { StampedeStore } from './store';

describe('LoadAndFill: run, fill, release', () => {
  it('stores the value for ttl + grace with its load time, and releases the lock in the same step', async () => {
    const s = stages();
    const c = s.call(
      'k',
      async () => {
        s.clock.advance(30);
        return { id: 1 };
      },
      { ttl: 1000, grace: 500, lock: true },
    );
    expect(await s.store.tryLock('k', 'tok', 5000)).toBe(true);
    const start = s.clock.now();
    expect(await s.fill.run(c, 'tok')).toEqual({ id: 1 });
    expect(await s.store.get('k')).toMatchObject({ v: { id: 1 }, d: 30, e: start + 30 + 1000 });
    expect(await s.store.tryLock('k', 'other', 5000)).toBe(true); // released
    s.clock.advance(1499);
    expect(await s.store.get('k')).toBeDefined(); // kept through grace
    s.clock.advance(1);
    expect(await s.store.get('k')).toBeUndefined();
    await s.close();
  });

  it('a loader error releases the lock and reaches the caller; nothing is stored', async () => {
    const s = stages();
    const c = s.call('k', async () => Promise.reject(new Error('db down')), { lock: true });
    await s.store.tryLock('k', 'tok', 5000);
    await expect(s.fill.run(c, 'tok')).rejects.toThrow('db down');
    expect(await s.store.tryLock('k', 'next', 5000)).toBe(true);
    expect(await s.store.get('k')).toBeUndefined();
    await s.close();
  });

  it('undefined is never stored, null only with cacheNull; the lock is released either way', async () => {
    const s = stages();
    await s.store.tryLock('a', 'tok', 5000);
    expect(
      await s.fill.run(
        s.call('a', async () => undefined, { lock: true }),
        'tok',
      ),
    ).toBeUndefined();
    expect(await s.store.get('a')).toBeUndefined();
    expect(await s.store.tryLock('a', 'next', 5000)).toBe(true);
    await s.fill.run(s.call('b', async () => null, { cacheNull: false }));
    expect(await s.store.get('b')).toBeUndefined();
    await s.fill.run(s.call('c', async () => null));
    expect((await s.store.get('c'))?.v).toBeNull();
    await s.close();
  });

  it('a value the serializer cannot write fails the call and releases the lock', async () => {
    const s = stages();
    await s.store.tryLock('k', 'tok', 5000);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await expect(
      s.fill.run(
        s.call('k', async () => cyclic, { lock: true }),
        'tok',
      ),
    ).rejects.toBeInstanceOf(StampedeSerializationError);
    expect(await s.store.tryLock('k', 'next', 5000)).toBe(true);
    await s.close();
  });

  it('jitter spreads the stored TTL over ttl * (1 +- ratio)', async () => {
    const s = stages({ random: () => 0 });
    await s.fill.run(s.call('k', async () => 1, { ttl: 1000, jitter: 0.2 }));
    expect((await s.store.get('k'))!.e - s.clock.now()).toBe(800);
    await s.close();
  });

  it('a store that fails to fill: the value is still returned, counted as a store error', async () => {
    const base = stages().store;
    const broken = Object.assign(Object.create(base), {
      fill: async () => Promise.reject(new Error('READONLY')),
    }) as StampedeStore;
    const s = stages({ store: broken });
    expect(await s.fill.run(s.call('k', async () => 'v'))).toBe('v');
    expect(s.counts().storeErrors).toBe(1);
    expect(s.guard.down).toBe(true);
    await base.close();
  });

  it('autoExtend: the lock is extended every third of its TTL while the load runs, and no longer', async () => {
    const s = stages();
    const extended: number[] = [];
    const store = s.store;
    const extendLock = store.extendLock.bind(store);
    store.extendLock = async (key, token, ttl) => {
      extended.push(s.clock.now());
      return extendLock(key, token, ttl);
    };
    let finish!: (v: string) => void;
    const c = s.call('k', () => new Promise<string>((r) => (finish = r)), {
      lock: { ttl: 300, autoExtend: true },
    });
    await store.tryLock('k', 'tok', 300);
    const start = s.clock.now();
    const running = s.fill.run(c, 'tok');
    s.clock.advance(1000); // the load takes longer than the lock TTL
    expect(extended).toEqual(
      [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000].map((d) => start + d),
    );
    expect(await store.tryLock('k', 'other', 300)).toBe(false); // still held
    finish('v');
    await running;
    s.clock.advance(1000);
    expect(extended).toHaveLength(10);
    await settle();
    await s.close();
  });

  it('a hard timeout rejects the caller, but the late value still fills the cache', async () => {
    const s = stages();
    let finish!: (v: string) => void;
    const c = s.call('k', () => new Promise<string>((r) => (finish = r)), { timeout: 100 });
    const running = s.fill.run(c);
    s.clock.advance(100);
    await expect(running).rejects.toThrow(/took longer than 100 ms/);
    finish('late');
    await settle();
    expect((await s.store.get('k'))?.v).toBe('late');
    await s.close();
  });
});
