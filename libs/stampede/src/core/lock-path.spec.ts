import { settle, stages } from '../../test/support/stages';
import type { StampedeStore } from './store';

describe('LockPath: try, wait, notify', () => {
  it('the first caller takes the lock and loads; later callers in this process join it', async () => {
    const s = stages();
    let finish!: (v: string) => void;
    let loads = 0;
    const c = s.call('k', () => (loads++, new Promise<string>((r) => (finish = r))), {
      lock: true,
    });
    const first = s.lockPath.load(c);
    const others = Array.from({ length: 5 }, () => s.lockPath.load(c));
    await settle();
    finish('v');
    expect(await first).toEqual({ value: 'v', waited: false, loaded: true });
    for (const o of await Promise.all(others))
      expect(o).toEqual({ value: 'v', waited: false, loaded: false, joined: true });
    expect(loads).toBe(1);
    expect(s.counts().joins).toBe(5);
    expect((await s.store.get('k'))?.v).toBe('v');
    await s.close();
  });

  it('a value filled since the caller read it is served, without a load', async () => {
    const s = stages();
    await s.store.set('k', { v: 'there', d: 0, e: s.clock.now() + 1000 }, 1000);
    const c = s.call('k', async () => 'loaded', { lock: true });
    expect(await s.lockPath.load(c)).toEqual({ value: 'there', waited: false, loaded: false });
    expect(s.counts().loads).toBe(0);
    await s.close();
  });

  it('a waiter is woken by the holder fill, not by the lock TTL or polling', async () => {
    const s = stages();
    // Another process (same store) holds the lock.
    await s.store.tryLock('k', 'elsewhere', 60_000);
    const c = s.call('k', async () => 'mine', { lock: { ttl: 60_000, poll: 50, wait: 120_000 } });
    const waiting = s.lockPath.load(c);
    await settle();
    expect(s.counts().lockWaits).toBe(1);
    s.clock.advance(10_000); // no poll: the waiter sleeps until notified
    await s.store.fill('k', { v: 'theirs', d: 0, e: s.clock.now() + 1000 }, 1000, 'elsewhere');
    expect(await waiting).toEqual({ value: 'theirs', waited: true, loaded: false });
    expect(s.counts()).toMatchObject({ loads: 0, lockWaitMs: 10_000 });
    await s.close();
  });

  it('an expired value still in the store that nobody refreshes: loaded once, under the refresh lock', async () => {
    const s = stages();
    await s.store.set('k', { v: 'old', d: 0, e: s.clock.now() - 1 }, 60_000);
    const c = s.call('k', async () => 'new', { lock: true });
    expect(await s.lockPath.load(c)).toEqual({ value: 'new', waited: false, loaded: true });
    expect(s.counts().loads).toBe(1);
    expect(await s.store.tryLock('k', 'next', 60_000)).toBe(true); // released by the fill
    await s.close();
  });

  it('an expired value whose refresh runs elsewhere: the caller sleeps poll by poll and gets the refresh', async () => {
    const s = stages();
    await s.store.set('k', { v: 'old', d: 0, e: s.clock.now() - 1 }, 60_000);
    await s.store.tryLock('k', 'elsewhere', 60_000);
    const c = s.call('k', async () => 'mine', { lock: { ttl: 60_000, poll: 10, wait: 120_000 } });
    const waiting = s.lockPath.load(c);
    for (let t = 0; t < 3; t++) {
      await settle(2); // it must yield: no loop of lock attempts without a timer
      s.clock.advance(10);
    }
    await s.store.fill('k', { v: 'refreshed', d: 0, e: s.clock.now() + 1000 }, 1000, 'elsewhere');
    s.clock.advance(10);
    expect(await waiting).toEqual({ value: 'refreshed', waited: true, loaded: false });
    expect(s.counts().loads).toBe(0);
    await s.close();
  });

  it('a holder that gives up (releases without a value): a waiter takes the lock and loads', async () => {
    const s = stages();
    await s.store.tryLock('k', 'elsewhere', 60_000);
    const c = s.call('k', async () => 'mine', { lock: { ttl: 60_000, wait: 120_000 } });
    const waiting = s.lockPath.load(c);
    await settle();
    await s.store.unlock('k', 'elsewhere');
    expect(await waiting).toEqual({ value: 'mine', waited: true, loaded: true });
    await s.close();
  });

  it('past lock.wait the waiter loads without the lock: counted, warned, an event', async () => {
    const s = stages();
    await s.store.tryLock('k', 'elsewhere', 60_000);
    const c = s.call('k', async () => 'mine', { lock: { ttl: 60_000, poll: 10, wait: 200 } });
    const waiting = s.lockPath.load(c);
    for (let t = 0; t < 30; t++) {
      await settle(2);
      s.clock.advance(10);
    }
    expect(await waiting).toEqual({ value: 'mine', waited: true, loaded: true });
    expect(s.counts().lockTimeouts).toBe(1);
    expect(s.warnings).toContain('waited 200 ms for the lock of "k"; loading without it');
    expect(s.emitted.map((e) => e.event)).toContain('stampede.lock.timeout');
    await s.close();
  });

  it('without live notifications, waiters poll every lock.poll', async () => {
    const base = stages().store;
    const deaf = Object.assign(Object.create(base), {
      watch: (key: string) => ({ ...base.watch(key), done: new Promise<void>(() => undefined) }),
      notificationsLive: () => false,
    }) as StampedeStore;
    const s = stages({ store: deaf });
    await base.tryLock('k', 'elsewhere', 60_000);
    const c = s.call('k', async () => 'mine', { lock: { ttl: 60_000, poll: 20, wait: 60_000 } });
    const waiting = s.lockPath.load(c);
    await settle();
    await base.fill('k', { v: 'theirs', d: 0, e: s.clock.now() + 1000 }, 1000, 'elsewhere');
    s.clock.advance(20); // one poll
    expect(await waiting).toEqual({ value: 'theirs', waited: true, loaded: false });
    await base.close();
  });
});
