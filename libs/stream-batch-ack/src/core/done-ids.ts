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

/**
 * A bounded in-process set of ids that forgets each one after its TTL, grouped by scope (one
 * stream, say): the memory of which entries were handled. The ids are the entries' own strings,
 * so no key is built per id; a read is one Map lookup, and the oldest ids go first when the set
 * is full (a ring of insertions, no reordering on reads, no node per id). Cheaper than LruCache
 * for marks that are written once and rarely read again.
 */
export class DoneIds {
  readonly maxSize: number;
  private readonly clock: Pick<Clock, 'now'>;
  private readonly scopes = new Map<string, Map<string, number>>();
  /** With `order`: per scope, the greatest id ever added (kept after the id itself goes). */
  private readonly greatest = new Map<string, string>();
  private readonly order: IdOrder | undefined;
  /** Insertions, oldest at `head`: the id and the map it went into. */
  private ringIds: string[] = [];
  private ringOwners: Map<string, number>[] = [];
  private head = 0;

  constructor(options: DoneIdsOptions = {}) {
    this.maxSize = Math.max(1, options.maxSize ?? 100_000);
    this.clock = options.clock ?? systemClock;
    this.order = options.order;
  }

  /** Ids held (expired ones included until they are read or pushed out). */
  get size(): number {
    let n = 0;
    for (const ids of this.scopes.values()) n += ids.size;
    return n;
  }

  /** For each of `ids` of `scope`: whether it is held and not expired. */
  hasMany(scope: string, ids: readonly string[]): boolean[] {
    const held = this.scopes.get(scope);
    const out = new Array<boolean>(ids.length);
    if (!held) return out.fill(false);
    const now = this.clock.now();
    const greatest = this.greatest.get(scope);
    for (let i = 0; i < ids.length; i++) {
      if (greatest !== undefined && this.order!(ids[i], greatest) > 0) {
        out[i] = false;
        continue;
      }
      const expiresAt = held.get(ids[i]);
      out[i] = expiresAt !== undefined && expiresAt > now;
    }
    return out;
  }

  has(scope: string, id: string): boolean {
    return this.hasMany(scope, [id])[0];
  }

  /** Holds `ids` of `scope` for `ttlMs` (an id held already gets the new expiry). */
  addMany(scope: string, ids: readonly string[], ttlMs: number): void {
    let held = this.scopes.get(scope);
    if (!held) this.scopes.set(scope, (held = new Map()));
    const expiresAt = this.clock.now() + ttlMs;
    if (this.order && ids.length > 0) {
      let greatest = this.greatest.get(scope) ?? ids[0];
      for (const id of ids) if (this.order(id, greatest) > 0) greatest = id;
      this.greatest.set(scope, greatest);
    }
    for (const id of ids) {
      if (held.has(id)) {
        held.set(id, expiresAt);
        continue;
      }
      held.set(id, expiresAt);
      this.ringIds.push(id);
      this.ringOwners.push(held);
    }
    this.evict();
  }

  clear(): void {
    this.scopes.clear();
    this.greatest.clear();
    this.ringIds = [];
    this.ringOwners = [];
    this.head = 0;
  }

  /** Drops the oldest insertions beyond maxSize. */
  private evict(): void {
    const excess = this.ringIds.length - this.head - this.maxSize;
    if (excess <= 0) return;
    for (let n = 0; n < excess; n++, this.head++)
      this.ringOwners[this.head].delete(this.ringIds[this.head]);
    // Compact the ring once its dead front is as long as what it holds.
    if (this.head >= 1024 && this.head * 2 >= this.ringIds.length) {
      this.ringIds = this.ringIds.slice(this.head);
      this.ringOwners = this.ringOwners.slice(this.head);
      this.head = 0;
    }
    for (const [scope, ids] of this.scopes) if (ids.size === 0) this.scopes.delete(scope);
  }
}
