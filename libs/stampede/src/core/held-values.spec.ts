import { settle, stages } from '../../test/support/stages';
import type { Envelope } from './envelope';
import type { StampedeStore } from './store';

const L1 = { maxEntries: 100, maxBytes: 1e6, maxStaleMs: 5000 };

describe('HeldValues: L1 and the last known values', () => {
  it('L1 serves a fresh value without the store, until its TTL passes', async () => {
    const s = stages({ l1: L1 });
    const c = s.call('k', async () => 'v');
    const envelope: Envelope = { v: 'v', d: 0, e: s.clock.now() + 1000 };
    s.held.hold(c, envelope);
    expect(s.held.fresh('k', c.policy, undefined)?.v).toBe('v');
    s.clock.advance(1000);
    expect(s.held.fresh('k', c.policy, undefined)).toBeUndefined();
    await s.close();
  });

  it('a method with l1: false, or a module without L1, is never served from it', async () => {
    const s = stages({ l1: L1 });
    const off = s.call('k', async () => 'v', { l1: false });
    s.held.hold(off, { v: 'v', d: 0, e: s.clock.now() + 1000 });
    expect(s.held.fresh('k', off.policy, undefined)).toBeUndefined();
    const none = stages();
    const c = none.call('k', async () => 'v');
    none.held.hold(c, { v: 'v', d: 0, e: none.clock.now() + 1000 });
    expect(none.held.fresh('k', c.policy, undefined)).toBeUndefined();
    expect(none.held.l1Stats()).toBeUndefined();
    await s.close();
    await none.close();
  });

  it('while the bus is down, an entry older than maxStaleMs is read from the store again', async () => {
    const s = stages({ l1: L1 });
    const c = s.call('k', async () => 'v', { ttl: 60_000 });
    s.held.hold(c, { v: 'v', d: 0, e: s.clock.now() + 60_000 });
    s.bus.changed(s.clock.now(), s.clock.now());
    s.clock.advance(4999);
    expect(s.held.fresh('k', c.policy, undefined)?.v).toBe('v');
    s.clock.advance(1);
    expect(s.held.fresh('k', c.policy, undefined)).toBeUndefined();
    await s.close();
  });

  it('a value stamped with an older tag version is dropped, here and in the store', async () => {
    const s = stages({ l1: L1 });
    const c = s.call('k', async () => 'v', { ttl: 60_000 });
    s.tags.learn('t', 1);
    const envelope: Envelope = { v: 'v', d: 0, e: s.clock.now() + 60_000, t: { t: 1 } };
    s.held.hold(c, envelope);
    await s.store.set('k', envelope, 60_000);
    expect(s.held.fresh('k', c.policy, ['t'])?.v).toBe('v');
    s.tags.learn('t', 2);
    expect(s.held.fresh('k', c.policy, ['t'])).toBeUndefined();
    expect(await s.held.usable('k', await s.store.get('k'), 0)).toBeUndefined();
    expect(await s.store.get('k')).toBeUndefined();
    await s.close();
  });

  it('without L1, a distributed store keeps the last known values, served (within grace) only when asked', async () => {
    const store = { name: 'fake', distributed: true, delete: async () => undefined };
    const s = stages({ store: Object.assign(stages().store, store) as unknown as StampedeStore });
    const c = s.call('k', async () => 'v', { grace: 500 });
    s.held.hold(c, { v: 'v', d: 0, e: s.clock.now() + 1000 });
    expect(s.held.lastKnownStats().entries).toBe(1);
    expect(s.held.fresh('k', c.policy, undefined)).toBeUndefined(); // never a hit
    s.clock.advance(1499);
    expect(s.held.served(c, s.clock.now())?.v).toBe('v');
    s.clock.advance(1);
    expect(s.held.served(c, s.clock.now())).toBeUndefined();
    s.held.hold(c, { v: 'w', d: 0, e: s.clock.now() + 1000 });
    s.held.forget('k');
    expect(s.held.served(c, s.clock.now())).toBeUndefined();
    await settle();
  });

  it('a values-only store in this process keeps no second copy', async () => {
    const s = stages();
    const c = s.call('k', async () => 'v');
    s.held.hold(c, { v: 'v', d: 0, e: s.clock.now() + 1000 });
    expect(s.held.lastKnownStats().entries).toBe(0);
    await s.close();
  });
});
