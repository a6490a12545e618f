import { ALL_KEYS_TAG, TagVersions, withAllKeysTag } from './tag-versions';

describe('TagVersions', () => {
  it('a value is valid while its stamp is current; an older stamp is invalid, a newer one is learned', () => {
    const tags = new TagVersions();
    tags.learn('a', 5);
    expect(tags.valid({ a: 5 })).toBe(true);
    expect(tags.valid({ a: 4 })).toBe(false);
    expect(tags.valid({ a: 7 })).toBe(true); // a version this process had not seen yet
    expect(tags.valid({ a: 5 })).toBe(false);
    expect(tags.stamp(['a', 'b'])).toEqual({ a: 7, b: 0 });
  });

  it('next: above the known version, and at least the clock in microseconds', () => {
    const tags = new TagVersions();
    expect(tags.next('a')).toBe(1);
    expect(tags.next('a', 1_000)).toBe(1_000_000);
    tags.learn('a', 1_000_000);
    expect(tags.next('a', 1_000)).toBe(1_000_001); // two invalidations within one millisecond
    expect(tags.next('a', 2_000)).toBe(2_000_000);
  });

  it('versions issued after the known ones are lost start above them, as long as the clock does not go back', () => {
    const tags = new TagVersions(2);
    let now = 1_000;
    const stamps: Record<string, number>[] = [];
    for (let i = 0; i < 3; i++) {
      tags.learn('a', tags.next('a', now++));
      stamps.push(tags.stamp(['a']));
    }
    tags.learn('b', 1);
    tags.learn('c', 1); // past maxTags: the least recently used tag (a) is forgotten
    expect(tags.missing(['a'])).toEqual(['a']);

    tags.learn('a', tags.next('a', now++));
    for (const stamp of stamps) expect(tags.valid(stamp)).toBe(false);
  });

  it('past maxTags, the least recently used tag is forgotten, not every tag', () => {
    const tags = new TagVersions(2);
    tags.learn('a', 1);
    tags.learn('b', 1);
    tags.stamp(['a']); // a is used after b
    tags.learn('c', 1);
    expect(tags.missing(['a', 'b', 'c'])).toEqual(['b']);
  });

  it('a stamp or a version that is not a non-negative safe integer is never taken as current', () => {
    const tags = new TagVersions();
    tags.learn('a', 3);
    for (const junk of [NaN, Infinity, -1, 1.5, 2 ** 53, '9' as unknown as number]) {
      tags.learn('a', junk);
      expect(tags.valid({ a: junk })).toBe(false);
    }
    expect(tags.valid({ a: 3 })).toBe(true);
    expect(tags.next('a')).toBe(4);
  });

  it('reset: known tags must be fetched again, and keep their version until then', () => {
    const tags = new TagVersions();
    tags.learn('a', 3);
    tags.reset();
    expect(tags.missing(['a'])).toEqual(['a']);
    tags.learn('a', 0); // the stored version was lost: a lower one never replaces what is known
    expect(tags.missing(['a'])).toEqual([]);
    expect(tags.stamp(['a'])).toEqual({ a: 3 });
  });

  it('while broadcasts are missed, a version not fetched since the given time must be fetched again', () => {
    const tags = new TagVersions();
    tags.learn('a', 3, 1_000); // fetched at 1000
    tags.learn('b', 4); // broadcast: never fetched
    expect(tags.missing(['a', 'b'])).toEqual([]); // the bus is up: no fetch
    expect(tags.missing(['a', 'b'], 999)).toEqual(['b']);
    expect(tags.missing(['a', 'b'], 1_000)).toEqual(['a', 'b']);
    tags.learn('a', 3, 2_000); // fetched again, unchanged
    expect(tags.missing(['a'], 1_000)).toEqual([]);
    expect(tags.stamp(['a'])).toEqual({ a: 3 });
  });

  it('memory stays bounded by maxTags over any number of reconnects', () => {
    const tags = new TagVersions(10);
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 10; i++) tags.learn(`t${round}-${i}`, 1, round);
      tags.reset(); // the subscriber reconnected
    }
    const { known, fetched, unverified } = tags.sizes;
    expect(Math.max(known, fetched, unverified)).toBeLessThanOrEqual(10);
  });

  describe('soft invalidation', () => {
    it('values stamped before a soft invalidation are stale, not invalid; a hard one makes them invalid', () => {
      const tags = new TagVersions();
      tags.learn('a', 5);
      tags.learnSoft('a', 6);
      expect(tags.check({ a: 6 })).toBe('current');
      expect(tags.check({ a: 5 })).toBe('stale');
      expect(tags.valid({ a: 5 })).toBe(true);
      expect(tags.check({ a: 4 })).toBe('invalid'); // before the last hard invalidation
      tags.learnSoft('a', 7);
      expect(tags.check({ a: 5 })).toBe('stale'); // soft after soft: the floor stays
      tags.learn('a', 8);
      expect(tags.check({ a: 7 })).toBe('invalid');
      expect(tags.check({ a: 8 })).toBe('current');
    });

    it('one stale tag makes the value stale; one invalid tag makes it invalid', () => {
      const tags = new TagVersions();
      tags.learn('a', 1);
      tags.learn('b', 1);
      tags.learnSoft('a', 2);
      expect(tags.check({ a: 1, b: 1 })).toBe('stale');
      tags.learn('b', 2);
      expect(tags.check({ a: 1, b: 1 })).toBe('invalid');
    });

    it('a soft version of a tag unknown here, or learned from a stamp, counts as hard (never too lenient)', () => {
      const tags = new TagVersions();
      tags.learnSoft('a', 3);
      expect(tags.check({ a: 2 })).toBe('invalid');
      tags.check({ b: 4 }); // learned from a newer stamp
      expect(tags.check({ b: 3 })).toBe('invalid');
    });

    it('a fetched state keeps the floor the store reports; a smaller one never lowers it', () => {
      const tags = new TagVersions();
      tags.learn('a', 10, 0, 8);
      expect(tags.hardFloor('a')).toBe(8);
      expect(tags.check({ a: 9 })).toBe('stale');
      tags.learn('a', 10, 0, 5);
      expect(tags.hardFloor('a')).toBe(8);
      tags.learn('a', 12, 0, 9);
      expect(tags.check({ a: 8 })).toBe('invalid');
      expect(tags.check({ a: 9 })).toBe('stale');
      tags.learnSoft('a', 11); // older than the known version: ignored
      expect(tags.check({ a: 12 })).toBe('current');
    });
  });

  it('withAllKeysTag: every call gets the prefix tag, the same array for the same tags', () => {
    expect(withAllKeysTag(undefined)).toEqual([ALL_KEYS_TAG]);
    expect(withAllKeysTag([])).toBe(withAllKeysTag(undefined));
    const policyTags = ['a', 'b'];
    expect(withAllKeysTag(policyTags)).toEqual([ALL_KEYS_TAG, 'a', 'b']);
    expect(withAllKeysTag(policyTags)).toBe(withAllKeysTag(policyTags));
  });
});
