import { Clock, systemClock } from '@nest-redis-resilience/common';

/** Orders two ids (negative, 0, positive), as `compareIds` does entry ids. */
export type IdOrder = (a: string, b: string) => number;

export interface DoneIdsOptions {
  /** Most ids kept over every scope; the oldest batches go first. Default 100_000. */
  maxSize?: number;
  /**
   * With an order of the ids: an id above the greatest one ever added to its scope is known not
   * to be held without a lookup (a new entry of a stream, whose ids only grow).
   */
  order?: IdOrder;
  clock?: Pick<Clock, 'now'>;
}

/** One addMany() call. */
interface Batch {
  readonly ids: readonly string[];
  readonly expiresAt: number;
}

/** The batches of one scope, oldest first, and the lookup index of the older ones. */
class Scope {
  batches: Batch[] = [];
  head = 0;
  /** Batches before this position (absolute, counting evicted ones) are in `index`. */
  indexedUpTo = 0;
  /** Evicted so far: position of batches[head]. */
  evicted = 0;
  readonly index = new Map<string, Batch>();
  greatest: string | undefined;

  /** Indexes the batches added since the last lookup. */
  catchUp(): void {
    const end = this.evicted + (this.batches.length - this.head);
    for (let pos = Math.max(this.indexedUpTo, this.evicted); pos < end; pos++) {
      const batch = this.batches[this.head + pos - this.evicted];
      for (const id of batch.ids) this.index.set(id, batch);
    }
    this.indexedUpTo = end;
  }

  evictOldest(): number {
    const batch = this.batches[this.head];
    if (this.evicted < this.indexedUpTo)
      for (const id of batch.ids) if (this.index.get(id) === batch) this.index.delete(id);
    this.head++;
    this.evicted++;
    if (this.head >= 1024 && this.head * 2 >= this.batches.length) {
      this.batches = this.batches.slice(this.head);
      this.head = 0;
    }
    return batch.ids.length;
  }
}

/**
 * A bounded in-process set of ids that forgets each one after its TTL, grouped by scope (one
 * stream, say): the memory of which entries were handled. It keeps the marked batches as they
 * come (no work per id) and builds its lookup index only when asked about ids that can be held:
 * with an order, an id above the greatest one added to its scope is new and needs no lookup, which
 * is every id of a stream's new entries. The oldest batches go first when the set is full.
 */
export class DoneIds {
  readonly maxSize: number;
  private readonly clock: Pick<Clock, 'now'>;
  private readonly order: IdOrder | undefined;
  private readonly scopes = new Map<string, Scope>();
  /** The scope of every batch held, oldest first: the order of eviction over all scopes. */
  private fifo: Scope[] = [];
  private fifoHead = 0;
  /** Ids in the batches held. */
  private count = 0;

  constructor(options: DoneIdsOptions = {}) {
    this.maxSize = Math.max(1, options.maxSize ?? 100_000);
    this.clock = options.clock ?? systemClock;
    this.order = options.order;
  }

  /** Ids held, over every scope (expired ones included until their batch is pushed out). */
  get size(): number {
    return this.count;
  }

  /** For each of `ids` of `scope`: whether it is held and not expired. */
  hasMany(scope: string, ids: readonly string[]): boolean[] {
    const out = new Array<boolean>(ids.length).fill(false);
    const marks = this.scopes.get(scope);
    if (!marks) return out;
    const greatest = marks.greatest;
    let now: number | undefined;
    for (let i = 0; i < ids.length; i++) {
      if (greatest !== undefined && this.order!(ids[i], greatest) > 0) continue;
      if (now === undefined) {
        now = this.clock.now();
        marks.catchUp();
      }
      const batch = marks.index.get(ids[i]);
      out[i] = batch !== undefined && batch.expiresAt > now;
    }
    return out;
  }

  has(scope: string, id: string): boolean {
    return this.hasMany(scope, [id])[0];
  }

  /**
   * Holds `ids` of `scope` for `ttlMs` (an id held already gets the new expiry). The array is
   * kept: do not change it afterwards. `greatest`: the greatest of `ids`, when the caller knows it.
   */
  addMany(scope: string, ids: readonly string[], ttlMs: number, greatest?: string): void {
    if (ids.length === 0) return;
    let marks = this.scopes.get(scope);
    if (!marks) this.scopes.set(scope, (marks = new Scope()));
    marks.batches.push({ ids, expiresAt: this.clock.now() + ttlMs });
    this.fifo.push(marks);
    this.count += ids.length;
    if (this.order) {
      let top = greatest ?? ids[0];
      if (greatest === undefined) for (const id of ids) if (this.order(id, top) > 0) top = id;
      if (marks.greatest === undefined || this.order(top, marks.greatest) > 0) marks.greatest = top;
    }
    while (this.count > this.maxSize) this.count -= this.fifo[this.fifoHead++].evictOldest();
    if (this.fifoHead >= 1024 && this.fifoHead * 2 >= this.fifo.length) {
      this.fifo = this.fifo.slice(this.fifoHead);
      this.fifoHead = 0;
    }
  }

  clear(): void {
    this.scopes.clear();
    this.fifo = [];
    this.fifoHead = 0;
    this.count = 0;
  }
}
