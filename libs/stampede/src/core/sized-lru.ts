/**
 * A map bounded by entries and by the total cost of its values (characters of their encoded
 * text, about bytes), dropping the least recently used first. Every per-key map of values this
 * package keeps in a process is one: the in-process tier, the last known values, the in-memory
 * store.
 */
export class SizedLru<V> {
  private readonly map = new Map<string, { value: V; cost: number }>();
  private total = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxCost: number,
  ) {}

  /** Keeps `value` as the most recent; one that costs more than the whole bound is not kept. */
  set(key: string, value: V, cost: number): void {
    this.delete(key);
    if (cost > this.maxCost) return;
    this.map.set(key, { value, cost });
    this.total += cost;
    while (this.map.size > this.maxEntries || this.total > this.maxCost) {
      this.delete(this.map.keys().next().value as string);
    }
  }

  /** The value of `key`, made the most recently used. */
  get(key: string): V | undefined {
    const slot = this.map.get(key);
    if (!slot) return undefined;
    this.map.delete(key);
    this.map.set(key, slot);
    return slot.value;
  }

  /** The value of `key`, leaving the order alone. */
  peek(key: string): V | undefined {
    return this.map.get(key)?.value;
  }

  delete(key: string): void {
    const slot = this.map.get(key);
    if (!slot) return;
    this.map.delete(key);
    this.total -= slot.cost;
  }

  /** Drops the entries for which `drop` returns true. */
  deleteWhere(drop: (value: V, key: string) => boolean): void {
    for (const [key, slot] of this.map) if (drop(slot.value, key)) this.delete(key);
  }

  clear(): void {
    this.map.clear();
    this.total = 0;
  }

  get stats(): { entries: number; bytes: number } {
    return { entries: this.map.size, bytes: this.total };
  }
}
