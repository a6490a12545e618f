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

  it('holds 100k entries at most, like the article (100k ids, 1 min)', () => {
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
});
