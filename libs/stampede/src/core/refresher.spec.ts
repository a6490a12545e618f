import { settle, stages } from '../../test/support/stages';
import type { Envelope } from './envelope';

describe('Refresher: XFetch and grace refreshes', () => {
  const staleEnvelope = (now: number): Envelope<string> => ({ v: 'old', d: 10, e: now - 100 });

  it('within grace: the stale value at once, one refresh in the background', async () => {
    const s = stages();
    let loads = 0;
    const c = s.call('k', async () => `new${++loads}`, { grace: 5000 });
    const stale = staleEnvelope(s.clock.now());
    const outcomes = await Promise.all([
      s.refresher.serveStale(c, stale),
      s.refresher.serveStale(c, stale),
    ]);
    expect(outcomes).toEqual(Array(2).fill({ value: 'old', hit: true, stale: true }));
    await settle();
    expect(loads).toBe(1);
    expect((await s.store.get('k'))?.v).toBe('new1');
    expect(s.keys.isRefreshing('k')).toBe(false);
    await s.close();
  });

  it('a soft timeout waits that long for the refresh before serving stale', async () => {
    const s = stages();
    const c = s.call('fast', async () => 'fresh', { grace: 5000, timeout: { soft: 50 } });
    expect(await s.refresher.serveStale(c, staleEnvelope(s.clock.now()))).toEqual({
      value: 'fresh',
      hit: false,
    });
    const slow = s.call('slow', () => new Promise<string>(() => undefined), {
      grace: 5000,
      timeout: { soft: 50 },
    });
    const serving = s.refresher.serveStale(slow, staleEnvelope(s.clock.now()));
    await settle();
    s.clock.advance(50);
    expect(await serving).toMatchObject({ value: 'old', stale: true });
    await s.store.close();
  });

  it('a failed refresh: fail-safe (event, state), then no attempt until graceBackoff has passed', async () => {
    const s = stages();
    let loads = 0;
    const c = s.call('k', async () => (loads++, Promise.reject(new Error('db down'))), {
      grace: 5000,
      graceBackoff: 1000,
    });
    const stale = staleEnvelope(s.clock.now());
    await s.refresher.serveStale(c, stale);
    await settle();
    expect(loads).toBe(1);
    expect(s.counts().failSafes).toBe(1);
    expect(s.emitted.map((e) => e.event)).toContain('stampede.failsafe');
    expect(s.keys.failSafeState(s.clock.now())).toMatchObject({ keys: 1, methods: ['M.m'] });
    expect(s.warnings[0]).toMatch(
      /refresh within grace of "k" failed: db down; the current value is kept/,
    );
    s.clock.advance(999);
    await s.refresher.serveStale(c, stale);
    await settle();
    expect(loads).toBe(1);
    s.clock.advance(1);
    await s.refresher.serveStale(c, stale);
    await settle();
    expect(loads).toBe(2);
    await s.close();
  });

  it('XFetch: not due before the sampled moment (never before half the TTL); then one recomputation', async () => {
    const s = stages({ random: () => 0.5 });
    let loads = 0;
    const c = s.call('k', async () => ++loads, { ttl: 1000, xfetch: true });
    const envelope: Envelope<number> = { v: 0, d: 100, e: s.clock.now() + 1000 };
    // random 0.5: a lead of 100 * (ln 10 - ln(-ln 0.5)) = 267 ms before expiry.
    s.clock.advance(732);
    s.refresher.maybeEarly(c, envelope);
    await settle();
    expect(loads).toBe(0);
    s.clock.advance(2);
    s.refresher.maybeEarly(c, envelope);
    s.refresher.maybeEarly(c, envelope);
    await settle();
    expect(loads).toBe(1);
    expect(s.counts().earlyRecomputes).toBe(1);
    await s.close();
  });

  it('with a lock: another instance refreshing makes this one stay quiet until the value expires', async () => {
    const s = stages({ random: () => 1 - 1e-12 });
    let loads = 0;
    const c = s.call('k', async () => ++loads, { ttl: 1000, xfetch: true, lock: true });
    const envelope: Envelope<number> = { v: 0, d: 10, e: s.clock.now() + 1000 };
    await s.store.set('k', envelope, 1000);
    await s.store.tryLock('k', 'elsewhere', 5000);
    s.clock.advance(750); // due: a lead of 10 * (ln 10 - ln(1e-12)) = 299 ms
    s.refresher.maybeEarly(c, envelope);
    await settle();
    expect(loads).toBe(0);
    expect(s.keys.isRefreshing('k')).toBe(true); // quiet
    s.refresher.maybeEarly(c, envelope); // quiet: no second attempt
    await settle();
    expect(s.keys.isRefreshing('k')).toBe(true);
    s.clock.advance(250);
    await settle();
    expect(s.keys.isRefreshing('k')).toBe(false);
    expect(loads).toBe(0);
    await s.close();
  });

  it('close waits for the refreshes running, and later ones do not start', async () => {
    const s = stages();
    let finish!: (v: string) => void;
    const c = s.call('k', () => new Promise<string>((r) => (finish = r)), { grace: 5000 });
    void s.refresher.serveStale(c, staleEnvelope(s.clock.now()));
    await settle();
    let closed = false;
    const closing = s.refresher.close().then(() => (closed = true));
    await settle();
    expect(closed).toBe(false);
    finish('v');
    await closing;
    expect(s.refresher.inBackground(c, staleEnvelope(s.clock.now()), false)).toBeUndefined();
    await s.store.close();
  });
});
