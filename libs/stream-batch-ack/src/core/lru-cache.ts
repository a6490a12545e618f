import { Clock, systemClock } from './clock';

export interface LruCacheOptions {
  /** Most entries kept; the least recently used goes first. Default 100_000. */
  maxSize?: number;
  /** Default time to live of an entry, in ms. Default 60_000. */
  ttlMs?: number;
  clock?: Pick<Clock, 'now'>;
}

interface Entry<V> {
  value: V;
  expiresAt: number;
}

/** A bounded in-process LRU map whose entries also expire after a TTL. */
export class LruCache<V> {
  private readonly map = new Map<string, Entry<V>>();
  readonly maxSize: number;
  readonly ttlMs: number;
  private readonly clock: Pick<Clock, 'now'>;

  constructor(options: LruCacheOptions = {}) {
    this.maxSize = Math.max(1, options.maxSize ?? 100_000);
    this.ttlMs = Math.max(1, options.ttlMs ?? 60_000);
    this.clock = options.clock ?? systemClock;
  }

  /** Entries held, expired ones included until they are touched or evicted. */
  get size(): number {
    return this.map.size;
  }

  get(key: string): V | undefined {
    const entry = this.map.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.clock.now()) {
      this.map.delete(key);
      return undefined;
    }
    this.map.delete(key);
    this.map.set(key, entry);
    return entry.value;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  set(key: string, value: V, ttlMs = this.ttlMs): this {
    this.map.delete(key);
    this.map.set(key, { value, expiresAt: this.clock.now() + ttlMs });
    while (this.map.size > this.maxSize) {
      const oldest = this.map.keys().next().value as string;
      this.map.delete(oldest);
    }
    return this;
  }

  delete(key: string): boolean {
    return this.map.delete(key);
  }

  clear(): void {
    this.map.clear();
  }

  /** Drops expired entries now; returns how many. */
  prune(): number {
    const now = this.clock.now();
    let n = 0;
    for (const [key, entry] of this.map) {
      if (entry.expiresAt <= now) {
        this.map.delete(key);
        n++;
      }
    }
    return n;
  }
}
