import { LastKnownValues } from './last-known';

describe('LastKnownValues', () => {
  it('serves a value until its expiry, then forgets it', () => {
    const known = new LastKnownValues();
    known.remember('k', { v: 1, d: 5, e: 1000 });
    expect(known.fresh('k', 999)?.v).toBe(1);
    expect(known.fresh('k', 1000)).toBeUndefined();
    expect(known.fresh('k', 0)).toBeUndefined(); // forgotten once seen expired
  });

  it('keeps at most maxEntries, dropping the least recently remembered', () => {
    const known = new LastKnownValues(2);
    known.remember('a', { v: 'a', d: 0, e: 10 });
    known.remember('b', { v: 'b', d: 0, e: 10 });
    known.remember('a', { v: 'a2', d: 0, e: 10 }); // seen again: now the most recent
    known.remember('c', { v: 'c', d: 0, e: 10 });
    expect(known.fresh('b', 0)).toBeUndefined();
    expect(known.fresh('a', 0)?.v).toBe('a2');
    expect(known.fresh('c', 0)?.v).toBe('c');
    known.forget('c');
    expect(known.fresh('c', 0)).toBeUndefined();
  });
});
