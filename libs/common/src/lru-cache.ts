import { Clock, systemClock } from './clock';

export interface LruCacheOptions {
  /** Most entries kept; the least recently used goes first. Default 100_000. */
  maxSize?: number;
  /**
   * Most total cost of the entries kept (each entry's `cost` in set(), e.g. the characters of its
   * encoded value); the least recently used go first. Default: no bound.
   */
  maxCost?: number;
  /** Default time to live of an entry, in ms (Infinity: none). Default 60_000. */
  ttlMs?: number;
  clock?: Pick<Clock, 'now'>;
}

/** Per entry, in set(): its time to live (default: the cache's `ttlMs`) and its cost (default 0). */
export interface LruEntryOptions {
  ttlMs?: number;
  cost?: number;
}

interface Node<V> {
  key: string;
  value: V;
  expiresAt: number;
  cost: number;
  /** Towards the most recently used end. */
  newer: Node<V> | null;
  /** Towards the least recently used end. */
  older: Node<V> | null;
}

/**
 * A bounded in-process LRU map whose entries also expire after a TTL. The recency order is a
 * doubly linked list beside the Map, so that get, set and eviction are O(1): evicting through
 * `map.keys().next()` after delete-and-reinsert moves walks over every deleted slot V8 keeps at
 * the front of the table, which made each `set` of a full cache cost tens of microseconds.
 */
export class LruCache<V> {
  private readonly map = new Map<string, Node<V>>();
  /** Most recently used. */
  private newest: Node<V> | null = null;
  /** Least recently used: evicted first. */
  private oldest: Node<V> | null = null;
  readonly maxSize: number;
  readonly maxCost: number;
  readonly ttlMs: number;
  private readonly clock: Pick<Clock, 'now'>;
  private totalCost = 0;

  constructor(options: LruCacheOptions = {}) {
    this.maxSize = Math.max(1, options.maxSize ?? 100_000);
    this.maxCost = options.maxCost ?? Infinity;
    this.ttlMs = Math.max(1, options.ttlMs ?? 60_000);
    this.clock = options.clock ?? systemClock;
  }

  /** Total cost of the entries held. */
  get cost(): number {
    return this.totalCost;
  }

  /** Entries held, expired ones included until they are touched or evicted. */
  get size(): number {
    return this.map.size;
  }

  get(key: string): V | undefined {
    const node = this.map.get(key);
    if (!node) return undefined;
    if (this.expired(node)) {
      this.remove(node);
      return undefined;
    }
    this.touch(node);
    return node.value;
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  /** The value of `key`, leaving the recency order alone. */
  peek(key: string): V | undefined {
    const node = this.map.get(key);
    return node && !this.expired(node) ? node.value : undefined;
  }

  /**
   * Keeps `value` as the most recently used, for `ttlMs` (a number) or the entry's options. An
   * entry that costs more than `maxCost` is not kept (and the key's old value goes).
   */
  set(key: string, value: V, entry: number | LruEntryOptions = this.ttlMs): this {
    const ttlMs = typeof entry === 'number' ? entry : (entry.ttlMs ?? this.ttlMs);
    const cost = typeof entry === 'number' ? 0 : (entry.cost ?? 0);
    if (cost > this.maxCost) {
      this.delete(key);
      return this;
    }
    const expiresAt = ttlMs === Infinity ? Infinity : this.clock.now() + ttlMs;
    const existing = this.map.get(key);
    if (existing) {
      existing.value = value;
      existing.expiresAt = expiresAt;
      this.totalCost += cost - existing.cost;
      existing.cost = cost;
      this.touch(existing);
    } else {
      const node: Node<V> = { key, value, expiresAt, cost, newer: null, older: this.newest };
      if (this.newest) this.newest.newer = node;
      this.newest = node;
      if (!this.oldest) this.oldest = node;
      this.map.set(key, node);
      this.totalCost += cost;
    }
    while ((this.map.size > this.maxSize || this.totalCost > this.maxCost) && this.oldest)
      this.remove(this.oldest);
    return this;
  }

  delete(key: string): boolean {
    const node = this.map.get(key);
    if (!node) return false;
    this.remove(node);
    return true;
  }

  /** Drops the entries for which `drop` returns true; returns how many. */
  deleteWhere(drop: (value: V, key: string) => boolean): number {
    let n = 0;
    for (let node = this.oldest; node;) {
      const newer: Node<V> | null = node.newer;
      if (drop(node.value, node.key)) {
        this.remove(node);
        n++;
      }
      node = newer;
    }
    return n;
  }

  /** The values held (expired ones included), least recently used first; the order is not changed. */
  *values(): IterableIterator<V> {
    for (let node = this.oldest; node; node = node.newer) yield node.value;
  }

  clear(): void {
    this.map.clear();
    this.newest = null;
    this.oldest = null;
    this.totalCost = 0;
  }

  /** Drops expired entries now; returns how many. */
  prune(): number {
    const now = this.clock.now();
    let n = 0;
    for (let node = this.oldest; node;) {
      const newer: Node<V> | null = node.newer;
      if (node.expiresAt <= now) {
        this.remove(node);
        n++;
      }
      node = newer;
    }
    return n;
  }

  /** An entry that never expires costs no clock read (a lookup of the caches that use none). */
  private expired(node: Node<V>): boolean {
    return node.expiresAt !== Infinity && node.expiresAt <= this.clock.now();
  }

  /** Makes `node` the most recently used. */
  private touch(node: Node<V>): void {
    if (node === this.newest) return;
    this.unlink(node);
    node.older = this.newest;
    node.newer = null;
    if (this.newest) this.newest.newer = node;
    this.newest = node;
    if (!this.oldest) this.oldest = node;
  }

  private remove(node: Node<V>): void {
    this.unlink(node);
    this.map.delete(node.key);
    this.totalCost -= node.cost;
  }

  private unlink(node: Node<V>): void {
    if (node.newer) node.newer.older = node.older;
    else this.newest = node.older;
    if (node.older) node.older.newer = node.newer;
    else this.oldest = node.newer;
    node.newer = null;
    node.older = null;
  }
}
