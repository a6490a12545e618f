import { LruCache } from '@nest-redis-resilience/common';

/**
 * A map bounded by entries and by the total cost of its values (characters of their encoded
 * text, about bytes), dropping the least recently used first. Every per-key map of values this
 * package keeps in a process is one: the in-process tier, the last known values, the in-memory
 * store. It is the shared LruCache (O(1) get, set and eviction), without TTL.
 */
export class SizedLru<V> {
  private readonly lru: LruCache<V>;

  constructor(
    private readonly maxEntries: number,
    maxCost: number,
  ) {
    // No TTL: the cache reads no clock.
    this.lru = new LruCache<V>({ maxSize: maxEntries, maxCost, ttlMs: Infinity });
  }

  /** Keeps `value` as the most recent; one that costs more than the whole bound is not kept. */
  set(key: string, value: V, cost: number): void {
    if (this.maxEntries < 1) return;
    this.lru.set(key, value, { cost });
  }

  /** The value of `key`, made the most recently used. */
  get(key: string): V | undefined {
    return this.lru.get(key);
  }

  /** The value of `key`, leaving the order alone. */
  peek(key: string): V | undefined {
    return this.lru.peek(key);
  }

  delete(key: string): void {
    this.lru.delete(key);
  }

  /** Drops the entries for which `drop` returns true. */
  deleteWhere(drop: (value: V, key: string) => boolean): void {
    this.lru.deleteWhere(drop);
  }

  clear(): void {
    this.lru.clear();
  }

  get stats(): { entries: number; bytes: number } {
    return { entries: this.lru.size, bytes: this.lru.cost };
  }
}
