import { MemoryStore } from '../memory/memory-store';
import { ManualClock } from './clock';
import { resolvePolicy } from './policy';
import { StampedeEngine } from './stampede-engine';

const flush = () => new Promise((r) => setImmediate(r));

describe('StampedeEngine (memory store, fake clock and random)', () => {
  let clock: ManualClock;
  let store: MemoryStore;
  let random: number;
  let engine: StampedeEngine;

  beforeEach(() => {
    clock = new ManualClock(1_000_000);
    store = new MemoryStore({ clock });
    random = 0.5;
    engine = new StampedeEngine({ store, clock, random: () => random });
  });

  afterEach(async () => {
    await engine.close();
    await store.close();
  });

  it('caches until the TTL passes on the injected clock', async () => {
    const policy = resolvePolicy({ ttl: 1000 }, 60_000, 't');
    let loads = 0;
    const loader = async () => ++loads;
    expect(await engine.getOrLoad('k', loader, policy)).toBe(1);
    clock.advance(999);
    expect(await engine.getOrLoad('k', loader, policy)).toBe(1);
    clock.advance(1);
    expect(await engine.getOrLoad('k', loader, policy)).toBe(2);
  });

  it('XFetch: a draw that fires recomputes in the background while the caller gets the current value', async () => {
    const policy = resolvePolicy({ ttl: 1000, xfetch: { beta: 1 } }, 60_000, 't');
    let loads = 0;
    const gate: Array<() => void> = [];
    const loader = () =>
      new Promise<number>((resolve) => {
        loads++;
        const value = loads;
        if (loads === 1) {
          clock.advance(100); // delta = 100 ms
          resolve(value);
        } else gate.push(() => resolve(value));
      });
    // One moment per stored value: random 0.01 gives a lead of
    // 100 * (ln 10 - ln(-ln 0.01)) = 77.5 ms before expiry.
    random = 0.01;
    expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(1);
    // 200 ms before expiry: not due yet.
    clock.advance(800);
    expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(1);
    expect(loads).toBe(1);
    // 70 ms before expiry: due. The caller still gets 1 at once, one recomputation starts.
    clock.advance(130);
    expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(1);
    expect(loads).toBe(2);
    clock.advance(10);
    expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(1);
    expect(loads).toBe(2); // coalesced: a second due read did not start another
    gate.shift()!();
    await flush();
    await flush();
    expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(2);
    expect(engine.metrics.snapshot().m).toMatchObject({
      earlyRecomputes: 1,
      staleServes: 2,
      misses: 1,
      hits: 4,
    });
  });

  it('XFetch: the refresh moment does not depend on how often the key is read', async () => {
    // A busy process coalesces reads: few of them reach the flow. With one read every 40 ms,
    // a per-read draw (random 0.5 fires within 69 ms of expiry) would start the load too late
    // for a 100 ms loader; the moment sampled per value (267 ms ahead) does not.
    const policy = resolvePolicy({ ttl: 1000, xfetch: { beta: 1 } }, 60_000, 't');
    for (const every of [1, 40]) {
      const key = `sparse-${every}`;
      let startedAt: number | undefined;
      let loads = 0;
      const loader = async () => {
        if (startedAt === undefined && loads > 0) startedAt = clock.now();
        loads++;
        clock.advance(100);
        return loads;
      };
      await engine.getOrLoad(key, loader, policy, key);
      const expiresAt = clock.now() + 1000;
      while (startedAt === undefined && clock.now() < expiresAt) {
        clock.advance(every);
        await engine.getOrLoad(key, loader, policy, key);
        await flush();
      }
      expect(startedAt).toBeDefined();
      const lead = expiresAt - startedAt!;
      expect(lead).toBeGreaterThan(266.9 - every);
      expect(lead).toBeLessThanOrEqual(266.9);
      expect(engine.metrics.snapshot()[key]).toMatchObject({ misses: 1, earlyRecomputes: 1 });
    }
  });

  it('a caller that misses while an early recomputation loads joins it instead of loading again', async () => {
    const policy = resolvePolicy({ ttl: 1000, xfetch: { beta: 1 } }, 60_000, 't');
    let loads = 0;
    let release!: () => void;
    const loader = () =>
      new Promise<number>((resolve) => {
        const value = ++loads;
        if (value === 1) {
          clock.advance(100);
          resolve(value);
        } else release = () => resolve(value);
      });
    await engine.getOrLoad('k', loader, policy, 'm');
    random = 0.001;
    clock.advance(990); // 10 ms before expiry: the draw fires, the recomputation starts
    expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(1);
    clock.advance(20); // the value has expired, the recomputation is still loading
    const late = engine.getOrLoad('k', loader, policy, 'm');
    await flush();
    expect(loads).toBe(2);
    release();
    expect(await late).toBe(2);
    expect(loads).toBe(2);
  });

  it('DistLock: waiters are woken by the fill, not by the lock TTL', async () => {
    // Two instances on one store: the callers of the second wait for the first's lock, sharing
    // one wait (the lock path is shared within an instance).
    const other = new StampedeEngine({ store, clock });
    const policy = resolvePolicy({ ttl: 1000, lock: { ttl: 60_000, poll: 1 } }, 60_000, 't');
    let loads = 0;
    let release!: () => void;
    const loader = () =>
      new Promise<string>((resolve) => (loads++, (release = () => resolve('v'))));
    const holder = engine.getOrLoad('k', loader, policy, 'm');
    await flush();
    const callers = Array.from({ length: 49 }, () => other.getOrLoad('k', loader, policy, 'm'));
    await flush();
    expect(loads).toBe(1);
    release();
    // With a 60 s lock TTL, only the notification can end the wait before the test times out.
    expect(await Promise.all([holder, ...callers])).toEqual(Array(50).fill('v'));
    expect(loads).toBe(1);
    expect(other.metrics.snapshot().m).toMatchObject({ lockWaits: 1, joins: 48, loads: 0 });
    await other.close();
  });

  it('a store that fails answers from the loader', async () => {
    const policy = resolvePolicy({ ttl: 1000, lock: true }, 60_000, 't');
    const broken = new StampedeEngine({
      store: Object.assign(Object.create(store), {
        get: async () => {
          throw new Error('down');
        },
      }),
      clock,
    });
    expect(await broken.getOrLoad('k', async () => 'loaded', policy, 'm')).toBe('loaded');
    expect(broken.metrics.snapshot().m).toMatchObject({ storeErrors: 1, loads: 1 });
  });

  it('failing early recomputations warn at most once per 10 s, saying how many failed', async () => {
    const warnings: string[] = [];
    const eager = new StampedeEngine({
      store,
      clock,
      random: () => 1 - 1e-12, // with beta 100: a lead of 598 s, cut to half the TTL
      logger: { warn: (message) => warnings.push(message) },
    });
    const policy = resolvePolicy({ ttl: 60_000, xfetch: { beta: 100 } }, 60_000, 't');
    let failing = false;
    const loader = async () => {
      if (failing) throw new Error('backend down');
      clock.advance(200); // delta = 200 ms
      return 'v';
    };
    const round = async () => {
      for (let i = 0; i < 50; i++)
        expect(await eager.getOrLoad(`k${i}`, loader, policy, 'm')).toBe('v');
      for (let i = 0; i < 10; i++) await flush();
    };
    await round(); // 50 misses: loaded, no draw
    failing = true;
    clock.advance(30_000); // half the TTL: the earliest an early recomputation may start
    await round(); // 50 hits, each recomputation fails
    expect(eager.metrics.snapshot().m.earlyRecomputes).toBe(50);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/early recomputation of "k0" failed: backend down/);
    clock.advance(10_000);
    await round();
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toMatch(/and 49 more failed recomputation\(s\) since the last warning/);
    await eager.close();
  });

  describe('failSafeState(): values served stale because their refresh failed', () => {
    const policy = resolvePolicy({ ttl: 1000, grace: 5000, graceBackoff: 100 }, 60_000, 't');

    /** A loader that fails while `failing` is set; the value is the load count otherwise. */
    function flaky() {
      const state = { failing: false, loads: 0 };
      const loader = async () => {
        state.loads++;
        if (state.failing) throw new Error('backend down');
        return state.loads;
      };
      return { state, loader };
    }

    it('none at first; a failed refresh within grace puts the key in it, with its method', async () => {
      const { state, loader } = flaky();
      expect(await engine.getOrLoad('k', loader, policy, 'Rates.rate')).toBe(1);
      expect(engine.failSafeState()).toBeUndefined();
      state.failing = true;
      clock.advance(1500); // stale, within grace
      expect(await engine.getOrLoad('k', loader, policy, 'Rates.rate')).toBe(1);
      await flush();
      expect(engine.failSafeState()).toEqual({
        keys: 1,
        methods: ['Rates.rate'],
        since: clock.now(),
      });
      const since = clock.now();
      // Still failing on the next attempt: still in it, since the first failure.
      clock.advance(200);
      expect(await engine.getOrLoad('k', loader, policy, 'Rates.rate')).toBe(1);
      await flush();
      expect(engine.failSafeState()).toEqual({ keys: 1, methods: ['Rates.rate'], since });
    });

    it('leaves it when a refresh succeeds', async () => {
      const { state, loader } = flaky();
      await engine.getOrLoad('k', loader, policy, 'm');
      state.failing = true;
      clock.advance(1500);
      await engine.getOrLoad('k', loader, policy, 'm');
      await flush();
      expect(engine.failSafeState()?.keys).toBe(1);
      state.failing = false;
      clock.advance(200); // past graceBackoff: the next stale read refreshes again
      await engine.getOrLoad('k', loader, policy, 'm');
      await flush();
      await flush();
      expect(engine.failSafeState()).toBeUndefined();
      expect(await engine.getOrLoad('k', loader, policy, 'm')).toBe(state.loads); // fresh
    });

    it('leaves it when grace ends, or when the key is invalidated', async () => {
      const { state, loader } = flaky();
      await engine.getOrLoad('a', loader, policy, 'm1');
      await engine.getOrLoad('b', loader, policy, 'm2');
      state.failing = true;
      clock.advance(1500);
      await engine.getOrLoad('a', loader, policy, 'm1');
      await engine.getOrLoad('b', loader, policy, 'm2');
      await flush();
      expect(engine.failSafeState()).toMatchObject({ keys: 2, methods: ['m1', 'm2'] });
      await engine.invalidate('b');
      expect(engine.failSafeState()).toMatchObject({ keys: 1, methods: ['m1'] });
      clock.advance(5000); // past a's grace (expiry + 5 s): no stale value is served any more
      expect(engine.failSafeState()).toBeUndefined();
    });

    it('an early recomputation that fails is not a fail-safe (the value is still fresh)', async () => {
      const eager = resolvePolicy({ ttl: 1000, grace: 5000, xfetch: { beta: 1 } }, 60_000, 't');
      const { state, loader } = flaky();
      random = 0.999_999; // the earliest moment: due from half the TTL on
      await engine.getOrLoad(
        'k',
        async () => {
          clock.advance(100);
          return loader();
        },
        eager,
      );
      state.failing = true;
      clock.advance(600);
      await engine.getOrLoad('k', loader, eager);
      await flush();
      expect(state.loads).toBe(2); // the recomputation ran and failed
      expect(engine.failSafeState()).toBeUndefined();
    });
  });
});
