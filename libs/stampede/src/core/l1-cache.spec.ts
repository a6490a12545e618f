import { defaultCodec, EnvelopeCodec } from './envelope';
import { L1Cache } from './l1-cache';

describe('L1Cache', () => {
  it('with verifiedAfter, serves only entries stored or read since, and keeps the others', () => {
    const l1 = new L1Cache(defaultCodec, { maxEntries: 10, maxBytes: 10_000 });
    l1.set('old', { v: 1, d: 0, e: 10_000 }, 10_000, 100);
    l1.set('new', { v: 2, d: 0, e: 10_000 }, 10_000, 900);
    expect(l1.get('old', 1000, 500)).toBeUndefined();
    expect(l1.get('new', 1000, 500)?.v).toBe(2);
    expect(l1.get('old', 1000)?.v).toBe(1); // still there, for when the store fails
    l1.set('old', { v: 1, d: 0, e: 10_000 }, 10_000, 1000); // read from the store again
    expect(l1.get('old', 1000, 500)?.v).toBe(1);
  });

  it("sweep() drops what is kept no longer, and sizes count the value's text and key", () => {
    const l1 = new L1Cache(defaultCodec, { maxEntries: 10, maxBytes: 10_000 });
    const raw = defaultCodec.encodeValue('x');
    l1.set('a', { v: 'x', d: 0, e: 50 }, 100, 0);
    l1.set('b', { v: 'x', d: 0, e: 50 }, 200, 0);
    expect(l1.stats).toEqual({ entries: 2, bytes: 2 * (raw.length + 1) });
    l1.sweep(150);
    expect(l1.stats).toEqual({ entries: 1, bytes: raw.length + 1 });
    expect(l1.get('b', 150)?.v).toBe('x');
  });

  it("a hit returns a copy with the envelope's fields, and an entry the serializer cannot read is a miss", () => {
    const l1 = new L1Cache(defaultCodec, { maxEntries: 10, maxBytes: 10_000 });
    l1.set('k', { v: { n: 1 }, d: 7, e: 500, t: { a: 3 } }, 1000, 0);
    const first = l1.get<{ n: number }>('k', 100)!;
    expect(first).toEqual({ v: { n: 1 }, d: 7, e: 500, t: { a: 3 } });
    first.v.n = 2; // a caller's change reaches neither the cache nor other callers
    expect(l1.get<{ n: number }>('k', 100)?.v).toEqual({ n: 1 });

    const broken = new L1Cache(
      new EnvelopeCodec({
        serialize: (v) => JSON.stringify(v),
        deserialize: () => {
          throw new Error('no');
        },
      }),
      { maxEntries: 10, maxBytes: 10_000 },
    );
    broken.set('k', { v: 1, d: 0, e: 500 }, 1000, 0);
    expect(broken.get('k', 100)).toBeUndefined();
    expect(broken.stats.entries).toBe(0);
  });

  describe('shared', () => {
    const shared = () =>
      new L1Cache(defaultCodec, { maxEntries: 10, maxBytes: 10_000, shared: true });

    it('every hit returns the same copy, frozen to the last plain object and array', () => {
      const l1 = shared();
      const value = { n: 1, list: [{ m: 2 }], at: new Date(5) };
      l1.set('k', { v: value, d: 7, e: 500, t: { a: 3 } }, 1000, 0);
      const first = l1.get<typeof value>('k', 100)!;
      const second = l1.get<typeof value>('k', 100)!;
      expect(second.v).toBe(first.v);
      // Decoded from the stored text: the same as a store hit (a Date as its string), never the
      // object the caller handed in.
      expect(first).toEqual({
        v: { n: 1, list: [{ m: 2 }], at: new Date(5).toISOString() },
        d: 7,
        e: 500,
        t: { a: 3 },
      });
      expect(first.v).not.toBe(value);
      expect(Object.isFrozen(first.v)).toBe(true);
      expect(Object.isFrozen(first.v.list)).toBe(true);
      expect(Object.isFrozen(first.v.list[0])).toBe(true);
      expect(() => {
        (first.v as { n: number }).n = 2;
      }).toThrow(TypeError);
      expect(Object.isFrozen(value)).toBe(false);
    });

    it('sizes count the text as without sharing, and a value its serializer cannot read is not kept', () => {
      const l1 = shared();
      l1.set('a', { v: 'x', d: 0, e: 50 }, 100, 0);
      expect(l1.stats).toEqual({ entries: 1, bytes: defaultCodec.encodeValue('x').length + 1 });
      const broken = new L1Cache(
        new EnvelopeCodec({
          serialize: (v) => JSON.stringify(v),
          deserialize: () => {
            throw new Error('no');
          },
        }),
        { maxEntries: 10, maxBytes: 10_000, shared: true },
      );
      broken.set('k', { v: 1, d: 0, e: 500 }, 1000, 0);
      expect(broken.get('k', 100)).toBeUndefined();
      expect(broken.stats.entries).toBe(0);
    });
  });
});
