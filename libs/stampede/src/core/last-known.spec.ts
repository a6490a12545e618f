import { LastKnownValues } from './last-known';

describe('LastKnownValues', () => {
  it('serves a value until its expiry, then forgets it', () => {
    const known = new LastKnownValues();
    known.remember('k', { v: 1, d: 5, e: 1000 }, 20);
    expect(known.fresh('k', 999)?.v).toBe(1);
    expect(known.fresh('k', 1000)).toBeUndefined();
    expect(known.fresh('k', 0)).toBeUndefined(); // forgotten once seen expired
    expect(known.stats).toEqual({ entries: 0, bytes: 0 });
  });

  it('keeps at most maxEntries, dropping the least recently remembered', () => {
    const known = new LastKnownValues(2);
    known.remember('a', { v: 'a', d: 0, e: 10 }, 10);
    known.remember('b', { v: 'b', d: 0, e: 10 }, 10);
    known.remember('a', { v: 'a2', d: 0, e: 10 }, 10); // seen again: now the most recent
    known.remember('c', { v: 'c', d: 0, e: 10 }, 10);
    expect(known.fresh('b', 0)).toBeUndefined();
    expect(known.fresh('a', 0)?.v).toBe('a2');
    expect(known.fresh('c', 0)?.v).toBe('c');
    known.forget('c');
    expect(known.fresh('c', 0)).toBeUndefined();
  });

  it('keeps at most maxBytes (text and key), dropping the least recently remembered', () => {
    const known = new LastKnownValues(100, 100);
    known.remember('a', { v: 'a', d: 0, e: 10 }, 39); // 40 with its key
    known.remember('b', { v: 'b', d: 0, e: 10 }, 39);
    expect(known.stats).toEqual({ entries: 2, bytes: 80 });
    known.remember('c', { v: 'c', d: 0, e: 10 }, 39); // 120 > 100: 'a' goes
    expect(known.stats).toEqual({ entries: 2, bytes: 80 });
    expect(known.fresh('a', 0)).toBeUndefined();
    known.remember('huge', { v: 'h', d: 0, e: 10 }, 200); // larger than the bound: not kept
    expect(known.fresh('huge', 0)).toBeUndefined();
    expect(known.fresh('b', 0)?.v).toBe('b'); // nor does it push the others out
    known.remember('b', { v: 'b2', d: 0, e: 10 }, 9); // replaced: counted once
    expect(known.stats).toEqual({ entries: 2, bytes: 50 });
  });
});
