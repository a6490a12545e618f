import { MemoryStore } from '../memory/memory-store';
import { ManualClock } from './clock';
import { resolvePolicy } from './policy';
import { StampedeEngine } from './stampede-engine';

const flush = () => new Promise((r) => setImmediate(r));

describe('StampedeEngine: an L1 hit (memory store, fake clock and random)', () => {
  let clock: ManualClock;
  let store: MemoryStore;
  let random: number;
  let engine: StampedeEngine;

  beforeEach(() => {
    clock = new ManualClock(1_000_000);
    store = new MemoryStore({ clock });
    random = 0.5;
    engine = new StampedeEngine({
      store,
      clock,
      random: () => random,
      l1: { maxEntries: 100, maxBytes: 100_000 },
    });
  });

  afterEach(async () => {
    await engine.close();
    await store.close();
  });

  it('comes as an already resolved promise, reads no store and is counted', async () => {
    const policy = resolvePolicy({ ttl: 1000 }, 60_000, 't');
    await engine.getOrLoad('k', async () => ({ n: 1 }), policy, 'm');
    const reads = jest.spyOn(store, 'get');
    let value: { n: number } | undefined;
    void engine.getOrLoad('k', async () => ({ n: 2 }), policy, 'm').then((v) => (value = v));
    await Promise.resolve(); // one microtask: enough for a promise that was already resolved
    expect(value).toEqual({ n: 1 });
    expect(reads).not.toHaveBeenCalled();
    expect(engine.metrics.snapshot().m).toMatchObject({ calls: 2, hits: 1, l1Hits: 1, misses: 1 });
  });

  it('gives each caller its own copy of the value', async () => {
    const policy = resolvePolicy({ ttl: 1000 }, 60_000, 't');
    await engine.getOrLoad('k', async () => ({ n: 1 }), policy);
    const first = await engine.getOrLoad('k', async () => ({ n: 2 }), policy);
    first.n = 99;
    expect(await engine.getOrLoad('k', async () => ({ n: 3 }), policy)).toEqual({ n: 1 });
  });

  it('fresh(): the envelope of a hit, counted; a miss returns undefined and counts nothing', async () => {
    const policy = resolvePolicy({ ttl: 1000 }, 60_000, 't');
    expect(engine.fresh('k', async () => 1, policy, 'm')).toBeUndefined();
    expect(engine.metrics.snapshot().m).toMatchObject({ calls: 0, hits: 0 });
    await engine.getOrLoad('k', async () => 1, policy, 'm');
    expect(engine.fresh('k', async () => 2, policy, 'm')).toMatchObject({ v: 1 });
    expect(engine.metrics.snapshot().m).toMatchObject({ calls: 2, hits: 1, l1Hits: 1 });
    clock.advance(1000);
    expect(engine.fresh('k', async () => 2, policy, 'm')).toBeUndefined();
    expect(engine.metrics.snapshot().m).toMatchObject({ calls: 2 });
  });

  it('XFetch: a due L1 hit starts one early recomputation and answers with the current value', async () => {
    const policy = resolvePolicy({ ttl: 1000, xfetch: { beta: 1 } }, 60_000, 't');
    let loads = 0;
    const loader = async () => {
      loads++;
      if (loads === 1) clock.advance(100); // delta = 100 ms
      return loads;
    };
    random = 0.01; // due 77.5 ms before expiry (see stampede-engine.spec.ts)
    expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(1);
    clock.advance(800);
    expect(engine.fresh('k', loader, policy, 'm')?.v).toBe(1);
    expect(loads).toBe(1); // not due yet
    clock.advance(130);
    expect(engine.fresh('k', loader, policy, 'm')?.v).toBe(1);
    expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(1);
    expect(loads).toBe(2); // one recomputation for both due hits
    await flush();
    await flush();
    expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(2);
    expect(engine.metrics.snapshot().m).toMatchObject({ earlyRecomputes: 1, l1Hits: 4 });
  });
});
