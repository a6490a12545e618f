import { settle, stages } from '../../test/support/stages';
import { StoreUnavailableError } from './errors';
import type { StampedeStore } from './store';

const down = new StoreUnavailableError('Redis connection is reconnecting');
const L1 = { maxEntries: 100, maxBytes: 1e6 };

describe('Fallback: the store does not answer', () => {
  it('a value held here is served, no load', async () => {
    const s = stages({ l1: L1 });
    const c = s.call('k', async () => 'loaded', { grace: 1000 });
    s.held.hold(c, { v: 'held', d: 0, e: s.clock.now() + 1000 });
    expect(await s.fallback.serve(c, down)).toEqual({
      value: 'held',
      hit: true,
      stale: false,
      fromL1: true,
    });
    s.clock.advance(1500); // stale, within grace
    expect(await s.fallback.serve(c, down)).toMatchObject({ value: 'held', stale: true });
    expect(s.counts()).toMatchObject({ loads: 0, storeErrors: 2 });
    expect(s.warnings[0]).toMatch(/answered with a value held here, no load/);
    await s.close();
  });

  it('nothing held: one load per key at a time whatever the callers, and the value is kept', async () => {
    const s = stages({ l1: L1 });
    let finish!: (v: string) => void;
    let loads = 0;
    const c = s.call('k', () => (loads++, new Promise<string>((r) => (finish = r))), {
      singleFlight: false,
    });
    const outcomes = Array.from({ length: 10 }, () => s.fallback.serve(c, down));
    await settle();
    finish('v');
    const results = await Promise.all(outcomes);
    expect(results.map((o) => o.value)).toEqual(Array(10).fill('v'));
    expect(results.filter((o) => o.loaded)).toHaveLength(1);
    expect(loads).toBe(1);
    expect(s.counts().joins).toBe(9);
    expect(s.held.served(c, s.clock.now())?.v).toBe('v'); // the next outage is served from it
    expect(s.emitted[0]).toMatchObject({ event: 'stampede.store.unavailable' });
    await s.close();
  });

  it('without L1, the loaded value is kept among the last known values (any store)', async () => {
    const s = stages();
    const c = s.call('k', async () => 'v');
    await s.fallback.serve(c, down);
    expect(s.held.lastKnownStats().entries).toBe(1);
    await s.close();
  });

  it('a loader that fails reaches every waiting caller; nothing is kept', async () => {
    const s = stages();
    const c = s.call('k', async () => Promise.reject(new Error('db down')));
    await expect(
      Promise.all([s.fallback.serve(c, down), s.fallback.serve(c, down)]),
    ).rejects.toThrow('db down');
    expect(s.held.lastKnownStats().entries).toBe(0);
    expect(s.keys.size).toBe(0);
    await s.close();
  });

  it('a lock-path read that fails falls back here', async () => {
    const base = stages().store;
    const broken = Object.assign(Object.create(base), {
      get: async () => Promise.reject(down),
      readOrLock: async () => Promise.reject(down),
    }) as StampedeStore;
    const s = stages({ store: broken });
    const c = s.call('k', async () => 'v', { lock: true });
    expect(await s.lockPath.load(c)).toMatchObject({ value: 'v', loaded: true });
    expect(s.counts()).toMatchObject({ storeErrors: 1, loads: 1 });
    await base.close();
  });
});
