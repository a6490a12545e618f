import { Clock, systemClock } from './clock';

/** Orders two ids (negative, 0, positive), as `compareIds` does entry ids. */
export type IdOrder = (a: string, b: string) => number;

export interface DoneIdsOptions {
  /** Most ids kept over every scope; the oldest added go first. Default 100_000. */
  maxSize?: number;
  /**
   * With an order of the ids: an id above the greatest one ever added to its scope is known not
   * to be held without a lookup (a new entry of a stream, whose ids only grow).
   */
  order?: IdOrder;
  clock?: Pick<Clock, 'now'>;
}

/** When the ids of one addMany() call expire: shared by them, so that a mark costs no allocation. */
interface Stamp {
  readonly expiresAt: number;
}

/** One addMany() call, in the order of insertion. */
interface Added {
  readonly held: Map<string, Stamp>;
  readonly ids: readonly string[];
}

/**
 * A bounded in-process set of ids that forgets each one after its TTL, grouped by scope (one
 * stream, say): the memory of which entries were handled. The ids are the entries' own strings,
 * so no key is built per id; a mark is one Map insert (its batch shares one expiry), a read is one
 * lookup, and the oldest batches go first when the set is full (no reordering on reads, no node
 * per id). Cheaper than LruCache for marks that are written once and rarely read again.
 */
export class DoneIds {
  readonly maxSize: number;
  private readonly clock: Pick<Clock, 'now'>;
  private readonly order: IdOrder | undefined;
  private readonly scopes = new Map<string, Map<string, Stamp>>();
  /** With `order`: per scope, the greatest id ever added (kept after the id itself goes). */
  private readonly greatest = new Map<string, string>();
  private added: Added[] = [];
  private head = 0;
  /** Ids in `added` from `head` on. */
  private count = 0;

  constructor(options: DoneIdsOptions = {}) {
    this.maxSize = Math.max(1, options.maxSize ?? 100_000);
    this.clock = options.clock ?? systemClock;
    this.order = options.order;
  }

  /** Ids held (expired ones included until they are pushed out). */
  get size(): number {
    let n = 0;
    for (const held of this.scopes.values()) n += held.size;
    return n;
  }

  /** For each of `ids` of `scope`: whether it is held and not expired. */
  hasMany(scope: string, ids: readonly string[]): boolean[] {
    const held = this.scopes.get(scope);
    const out = new Array<boolean>(ids.length).fill(false);
    if (!held) return out;
    const now = this.clock.now();
    const greatest = this.greatest.get(scope);
    for (let i = 0; i < ids.length; i++) {
      if (greatest !== undefined && this.order!(ids[i], greatest) > 0) continue;
      const stamp = held.get(ids[i]);
      out[i] = stamp !== undefined && stamp.expiresAt > now;
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
    let held = this.scopes.get(scope);
    if (!held) this.scopes.set(scope, (held = new Map()));
    const stamp: Stamp = { expiresAt: this.clock.now() + ttlMs };
    for (const id of ids) held.set(id, stamp);
    this.added.push({ held, ids });
    this.count += ids.length;
    if (this.order) {
      let top = greatest ?? ids[0];
      if (greatest === undefined) for (const id of ids) if (this.order(id, top) > 0) top = id;
      const before = this.greatest.get(scope);
      if (before === undefined || this.order(top, before) > 0) this.greatest.set(scope, top);
    }
    this.evict();
  }

  clear(): void {
    this.scopes.clear();
    this.greatest.clear();
    this.added = [];
    this.head = 0;
    this.count = 0;
  }

  /**
   * Drops the oldest batches while more than maxSize ids are held. An id added again since is
   * dropped with its first batch (a shorter memory for it, no lookup per id here).
   */
  private evict(): void {
    if (this.count <= this.maxSize) return;
    while (this.count > this.maxSize) {
      const oldest = this.added[this.head++];
      for (const id of oldest.ids) oldest.held.delete(id);
      this.count -= oldest.ids.length;
    }
    if (this.head >= 1024 && this.head * 2 >= this.added.length) {
      this.added = this.added.slice(this.head);
      this.head = 0;
    }
    for (const [scope, held] of this.scopes) if (held.size === 0) this.scopes.delete(scope);
  }
}
