import { MemoryStore } from '../memory/memory-store';
import { ManualClock } from './clock';
import type { LoadContext } from './load-context';
import { resolvePolicy } from './policy';
import { StampedeEngine } from './stampede-engine';

const flush = () => new Promise((r) => setImmediate(r));

/** get / set / expire / clear and loader-set TTLs on the memory store, with a fake clock. */
describe('StampedeEngine entries (memory store, fake clock)', () => {
  let clock: ManualClock;
  let store: MemoryStore;
  let engine: StampedeEngine;
  const entry = { ttl: 1000, grace: 0, l1: true };

  beforeEach(async () => {
    clock = new ManualClock(1_000_000);
    store = new MemoryStore({ clock });
    engine = new StampedeEngine({
      store,
      clock,
      random: () => 0.5,
      l1: { maxEntries: 100, maxBytes: 1e6 },
    });
    await engine.prepare();
  });

  afterEach(async () => {
    await engine.close();
    await store.close();
  });

  it('set then get: fresh until its ttl, on the injected clock', async () => {
    await engine.set('k', 'v', entry, 'set');
    expect(await engine.get('k', 'get')).toBe('v');
    clock.advance(999);
    expect(await engine.get('k', 'get')).toBe('v');
    clock.advance(1);
    expect(await engine.get('k', 'get')).toBeUndefined();
  });

  it('set leaves the other values alone, tagged or not', async () => {
    const policy = resolvePolicy({ ttl: 60_000, tags: ['t'] }, 60_000, 't');
    let loads = 0;
    expect(await engine.getOrLoad('a', async () => ++loads, policy)).toBe(1);
    await engine.set('b', 'b', { ...entry, tags: ['t'] }, 'set');
    await engine.set('c', 'c', entry, 'set');
    expect(await engine.getOrLoad('a', async () => ++loads, policy)).toBe(1);
    expect(await engine.get('b', 'get')).toBe('b');
  });

  it('a value set is what getOrLoad serves; jitter spreads its ttl', async () => {
    await engine.set('k', 'set', { ...entry, jitter: 0.5 }, 'set');
    const policy = resolvePolicy({ ttl: 60_000 }, 60_000, 't');
    expect(await engine.getOrLoad('k', () => 'loaded', policy)).toBe('set');
    const stored = await store.get('k');
    expect(stored!.e - clock.now()).toBe(1000); // random 0.5: the middle of [500, 1500]
  });

  it('clear: every value before it is a miss, values after it are served', async () => {
    const policy = resolvePolicy({ ttl: 60_000, tags: ['t'] }, 60_000, 't');
    let loads = 0;
    expect(await engine.getOrLoad('a', async () => ++loads, policy)).toBe(1);
    await engine.set('b', 'b', entry, 'set');
    await engine.clear();
    expect(await engine.get('b', 'get')).toBeUndefined();
    expect(await engine.getOrLoad('a', async () => ++loads, policy)).toBe(2);
    expect(await engine.getOrLoad('a', async () => ++loads, policy)).toBe(2);
  });

  it('expire: with grace the value is served stale while one refresh runs; without, it is gone', async () => {
    const graced = resolvePolicy({ ttl: 60_000, grace: 60_000 }, 60_000, 't');
    let loads = 0;
    let release!: () => void;
    const slow = () =>
      new Promise<number>((resolve) => {
        const n = ++loads;
        if (n === 1) resolve(n);
        else release = () => resolve(n);
      });
    expect(await engine.getOrLoad('g', slow, graced)).toBe(1);
    await engine.expire('g');
    expect(await engine.getOrLoad('g', slow, graced)).toBe(1);
    expect(await engine.getOrLoad('g', slow, graced)).toBe(1);
    expect(loads).toBe(2);
    release();
    await flush();
    expect(await engine.getOrLoad('g', slow, graced)).toBe(2);

    const plain = resolvePolicy({ ttl: 60_000 }, 60_000, 't');
    expect(await engine.getOrLoad('p', async () => 'old', plain)).toBe('old');
    await engine.expire('p');
    expect(await store.get('p')).toBeUndefined();
    expect(await engine.getOrLoad('p', async () => 'new', plain)).toBe('new');
  });

  it('soft tag invalidation: stale within grace, a miss without grace', async () => {
    const graced = resolvePolicy({ ttl: 60_000, grace: 60_000, tags: ['t'] }, 60_000, 't');
    const plain = resolvePolicy({ ttl: 60_000, tags: ['t'] }, 60_000, 't');
    let n = 0;
    expect(await engine.getOrLoad('g', async () => `g${++n}`, graced)).toBe('g1');
    expect(await engine.getOrLoad('p', async () => `p${++n}`, plain)).toBe('p2');
    await engine.invalidateTags(['t'], 'soft');
    expect(await engine.getOrLoad('g', async () => `g${++n}`, graced)).toBe('g1'); // refresh runs
    expect(await engine.getOrLoad('p', async () => `p${++n}`, plain)).toBe('p4');
    await flush();
    expect(await engine.getOrLoad('g', async () => `g${++n}`, graced)).toBe('g3');
  });

  it("the loader's context sets ttl, grace and skip", async () => {
    const policy = resolvePolicy({ ttl: 60_000 }, 60_000, 't');
    let loads = 0;
    const loader = async (_signal: AbortSignal, ctx: LoadContext) => {
      ctx.ttl = 100;
      ctx.grace = 1000;
      return ++loads;
    };
    expect(await engine.getOrLoad('k', loader, policy)).toBe(1);
    expect((await store.get('k'))!.g).toBe(1000);
    clock.advance(100);
    expect(await engine.getOrLoad('k', loader, policy)).toBe(1); // stale within its own grace
    await flush();
    expect(await engine.getOrLoad('k', loader, policy)).toBe(2);

    const skipped = async (_signal: AbortSignal, ctx: LoadContext) => {
      ctx.skip = true;
      return 'x';
    };
    expect(await engine.getOrLoad('s', skipped, policy)).toBe('x');
    expect(await store.get('s')).toBeUndefined();
  });
});
