import { stages } from '../../test/support/stages';
import { StoreUnavailableError } from './errors';
import type { StampedeStore } from './store';
import { TagStamps } from './tag-stamps';

describe('TagStamps: the versions of a call tags when it starts', () => {
  function withVersions(tagVersions: StampedeStore['tagVersions']) {
    const s = stages();
    const store = { tagVersions };
    return { s, stamps: new TagStamps(store, s.tags, s.bus, s.guard, s.clock) };
  }

  it('a tag seen for the first time is read from the store once, however many callers', async () => {
    let reads = 0;
    const { s, stamps } = withVersions(async (tags) => (reads++, tags.map(() => 7)));
    const m = s.counts();
    const all = await Promise.all([stamps.stamp(['a'], m), stamps.stamp(['a'], m)]);
    expect(all).toEqual([{ a: 7 }, { a: 7 }]);
    expect(await stamps.stamp(['a'], m)).toEqual({ a: 7 });
    expect(reads).toBe(1);
    await s.close();
  });

  it('while the bus is down, a version older than maxStaleMs is read again', async () => {
    let reads = 0;
    const { s, stamps } = withVersions(async (tags) => (reads++, tags.map(() => 7)));
    await stamps.stamp(['a'], s.counts());
    s.bus.changed(s.clock.now(), s.clock.now());
    s.clock.advance(5000);
    await stamps.stamp(['a'], s.counts());
    expect(reads).toBe(2);
    await s.close();
  });

  it('a store that fails: the versions known here, counted as a store error', async () => {
    const { s, stamps } = withVersions(async () =>
      Promise.reject(new StoreUnavailableError('down')),
    );
    s.tags.learn('a', 3);
    s.tags.reset(); // known, but to be verified: asks the store, which fails
    expect(await stamps.stamp(['a', 'b'], s.counts())).toEqual({ a: 3, b: 0 });
    expect(s.counts().storeErrors).toBe(1);
    await s.close();
  });

  it('a store without shared versions: versions from this process clock', async () => {
    const { s, stamps } = withVersions(undefined);
    expect(await stamps.stamp(['a'], s.counts())).toEqual({ a: s.clock.now() * 1000 });
    await s.close();
  });
});
