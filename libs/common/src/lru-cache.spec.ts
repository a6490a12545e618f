import { ManualClock } from './clock';
import { LruCache } from './lru-cache';

describe('LruCache (fake clock)', () => {
  it('expires entries after their TTL', () => {
    const clock = new ManualClock(1000);
    const cache = new LruCache<string>({ ttlMs: 60_000, clock });
    cache.set('a', 'done');
    cache.set('b', 'done', 10);
    clock.advance(9);
    expect(cache.get('b')).toBe('done');
    clock.advance(1);
    expect(cache.get('b')).toBeUndefined();
    clock.advance(59_989);
    expect(cache.get('a')).toBe('done');
    clock.advance(1);
    expect(cache.has('a')).toBe(false);
    expect(cache.size).toBe(0);
  });

  it('is bounded: the least recently used entry goes first', () => {
    const clock = new ManualClock();
    const cache = new LruCache<number>({ maxSize: 3, clock });
    cache.set('a', 1).set('b', 2).set('c', 3);
    expect(cache.get('a')).toBe(1); // a is now the most recent
    cache.set('d', 4);
    expect(cache.size).toBe(3);
    expect(cache.get('b')).toBeUndefined();
    expect([cache.get('a'), cache.get('c'), cache.get('d')]).toEqual([1, 3, 4]);
  });

  it('holds 100k entries at most (about the ids of 1 min of a busy stream)', () => {
    const clock = new ManualClock();
    const cache = new LruCache<boolean>({ maxSize: 100_000, ttlMs: 60_000, clock });
    for (let i = 0; i < 150_000; i++) cache.set(`${i}-0`, true);
    expect(cache.size).toBe(100_000);
    expect(cache.has('49999-0')).toBe(false);
    expect(cache.has('50000-0')).toBe(true);
  });

  it('overwriting refreshes the value and the TTL; delete and prune remove entries', () => {
    const clock = new ManualClock();
    const cache = new LruCache<string>({ ttlMs: 100, clock });
    cache.set('k', 'processing', 10);
    clock.advance(5);
    cache.set('k', 'done');
    clock.advance(50);
    expect(cache.get('k')).toBe('done');
    cache.set('x', 'y', 1);
    clock.advance(2);
    expect(cache.prune()).toBe(1);
    expect(cache.delete('k')).toBe(true);
    expect(cache.size).toBe(0);
  });

  it('keeps the order of a plain reference model through thousands of random operations', () => {
    const clock = new ManualClock();
    const cache = new LruCache<number>({ maxSize: 50, ttlMs: 1_000_000, clock });
    const model: [string, number][] = []; // least recently used first
    let seed = 42;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    for (let i = 0; i < 20_000; i++) {
      const key = `k${random(120)}`;
      const at = model.findIndex(([k]) => k === key);
      const op = random(3);
      if (op === 0) {
        cache.set(key, i);
        if (at >= 0) model.splice(at, 1);
        model.push([key, i]);
        if (model.length > 50) model.shift();
      } else if (op === 1) {
        const expected = at >= 0 ? model[at][1] : undefined;
        expect(cache.get(key)).toBe(expected);
        if (at >= 0) model.push(...model.splice(at, 1));
      } else {
        expect(cache.delete(key)).toBe(at >= 0);
        if (at >= 0) model.splice(at, 1);
      }
      expect(cache.size).toBe(model.length);
    }
    // Evict everything by inserting fresh keys: the survivors go in the model's order.
    const survivors = model.map(([k]) => k);
    for (let n = 0; cache.size < 50; n++) cache.set(`fill${n}`, -1);
    for (let j = 0; j < survivors.length; j++) {
      cache.set(`fresh${j}`, -1);
      expect(cache.size).toBe(50);
      expect(cache.get(survivors[j])).toBeUndefined();
    }
  });

  it('with maxCost, is bounded by the total cost too; an entry over the bound is not kept', () => {
    const cache = new LruCache<string>({ maxSize: 10, maxCost: 10, ttlMs: Infinity });
    cache.set('a', 'aaaa', { cost: 4 }).set('b', 'bbbb', { cost: 4 });
    expect(cache.cost).toBe(8);
    cache.get('a'); // b is now the least recently used
    cache.set('c', 'cccc', { cost: 4 });
    expect([cache.peek('a'), cache.peek('b'), cache.peek('c')]).toEqual([
      'aaaa',
      undefined,
      'cccc',
    ]);
    expect(cache.cost).toBe(8);
    cache.set('a', 'a', { cost: 1 });
    expect(cache.cost).toBe(5);
    cache.set('c', 'too big', { cost: 11 });
    expect(cache.peek('c')).toBeUndefined();
    expect([cache.size, cache.cost]).toEqual([1, 1]);
  });

  it('peek leaves the order alone; deleteWhere drops what it is told to', () => {
    const clock = new ManualClock();
    const cache = new LruCache<number>({ maxSize: 3, clock });
    cache.set('a', 1).set('b', 2).set('c', 3);
    expect(cache.peek('a')).toBe(1); // a stays the least recently used
    cache.set('d', 4);
    expect(cache.peek('a')).toBeUndefined();
    expect(cache.deleteWhere((value) => value % 2 === 0)).toBe(2);
    expect([cache.peek('b'), cache.peek('c'), cache.peek('d')]).toEqual([undefined, 3, undefined]);
    cache.set('e', 5, 10);
    clock.advance(10);
    expect(cache.peek('e')).toBeUndefined();
    cache.clear();
    expect([cache.size, cache.cost]).toEqual([0, 0]);
  });

  it('reads no clock for entries that never expire, and still expires the others', () => {
    const clock = new ManualClock(1000);
    let reads = 0;
    const counted = { now: () => (reads++, clock.now()) };
    const cache = new LruCache<string>({ ttlMs: Infinity, clock: counted });
    cache.set('forever', 'x');
    expect([cache.get('forever'), cache.peek('forever'), cache.has('forever')]).toEqual([
      'x',
      'x',
      true,
    ]);
    expect(reads).toBe(0);
    cache.set('brief', 'y', 10);
    clock.advance(10);
    expect(cache.get('brief')).toBeUndefined();
    expect(cache.get('forever')).toBe('x');
    expect(reads).toBe(2); // the set and the get of 'brief'
  });
});
