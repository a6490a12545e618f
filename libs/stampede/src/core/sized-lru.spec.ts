import { SizedLru } from './sized-lru';

describe('SizedLru', () => {
  it('drops the least recently used past maxEntries or maxCost; get() refreshes, peek() does not', () => {
    const lru = new SizedLru<string>(3, 10);
    lru.set('a', 'A', 2);
    lru.set('b', 'B', 2);
    lru.set('c', 'C', 2);
    expect(lru.get('a')).toBe('A'); // a is now the most recent
    expect(lru.peek('b')).toBe('B'); // b stays the least recent
    lru.set('d', 'D', 2); // 4 entries: b goes
    expect(lru.peek('b')).toBeUndefined();
    expect(lru.stats).toEqual({ entries: 3, bytes: 6 });
    lru.set('e', 'E', 6); // 4 entries and 12 > 10: c goes, then 10 fits
    expect([lru.peek('c'), lru.peek('a'), lru.peek('d'), lru.peek('e')]).toEqual([
      undefined,
      'A',
      'D',
      'E',
    ]);
    expect(lru.stats).toEqual({ entries: 3, bytes: 10 });
    lru.set('f', 'F', 3); // a, then d go
    expect(lru.stats).toEqual({ entries: 2, bytes: 9 });
  });

  it('never keeps a value costlier than the whole bound, and counts a replaced value once', () => {
    const lru = new SizedLru<string>(10, 10);
    lru.set('a', 'A', 4);
    lru.set('big', 'B', 11);
    expect(lru.peek('big')).toBeUndefined();
    expect(lru.stats).toEqual({ entries: 1, bytes: 4 });
    lru.set('a', 'A2', 7);
    expect(lru.stats).toEqual({ entries: 1, bytes: 7 });
    lru.deleteWhere((value) => value === 'A2');
    expect(lru.stats).toEqual({ entries: 0, bytes: 0 });
  });
});
