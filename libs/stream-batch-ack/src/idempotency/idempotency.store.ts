import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { DoneIds } from '../core/done-ids';
import { LruCache, registerScripts } from '@nest-redis-resilience/common';
import { keySlot } from '../redis/keys';
import { bySlice, compareIds, doneMaxKey, doneSetKey } from './done-sets';
import { IDEMPOTENCY_SCRIPTS, IdempotencyScripts } from './idempotency-scripts';

export type IdempotencyState = 'acquired' | 'processing' | 'done';

export interface IdempotencyStoreOptions {
  /** L2, shared by every consumer. Without it only the in-process L1 is used. */
  redis?: Redis | Cluster | null;
  keyPrefix?: string;
  /** How long a processed key is remembered, in ms. Default 60_000. */
  ttlMs?: number;
  /** How long an in-progress key blocks other consumers if its consumer dies, in ms. Default 30_000. */
  lockMs?: number;
  /** L1 size bound. Default 100_000. */
  maxSize?: number;
}

export interface BeginResult {
  /** The token that marks this batch's keys in progress (see IDEMPOTENT_EFFECT_LUA). */
  token: string;
  states: IdempotencyState[];
  /** How many of the 'done' answers came from L2 (the rest from L1). */
  doneInL2: number;
  /** For keys in progress in another process: how long their holder's lock still lasts, in ms. */
  lockLeftMs: (number | undefined)[];
}

/** An entry under the default key (see beginOwned). */
export interface OwnedEntry {
  id: string;
  /** 1 = first delivery. */
  deliveries: number;
}

type Scripted = (Redis | Cluster) & IdempotencyScripts;

const DONE = 'done';
/** Ids per SADD or SMISMEMBER (a read batch is usually far smaller). */
const IDS_PER_COMMAND = 5000;
/** Tokens of an L1-only store need only be unique within the process. */
let localTokens = 0;

/**
 * Duplicate filter, a batch at a time: L1 (in-process, with TTL) in front of an optional L2
 * (Redis). A key is 'acquired' (run it), 'processing' (another run holds it: skip, do not
 * acknowledge) or 'done' (skip and acknowledge). Keys of your own (begin/finish) are marked in
 * progress before the run, done or forgotten after it: one script call per batch each, per hash
 * slot on a Cluster. Stream entries that one run holds at a time (beginOwned/finishOwned, the
 * transport's default key) get one done mark, written after the run.
 */
export class IdempotencyStore {
  readonly keyPrefix: string;
  readonly ttlMs: number;
  readonly lockMs: number;
  private readonly l1: LruCache<string>;
  /** L1 of the default-key entries (beginOwned): done ids per stream. */
  private readonly doneIds: DoneIds;
  private readonly redis: Scripted | null;
  private readonly cluster: boolean;
  /** Per scope: see shortcut(). */
  private readonly sameSlot = new Map<string, boolean>();

  constructor(options: IdempotencyStoreOptions = {}) {
    this.keyPrefix = options.keyPrefix ?? 'sba:idem:';
    this.ttlMs = options.ttlMs ?? 60_000;
    this.lockMs = options.lockMs ?? 30_000;
    this.l1 = new LruCache<string>({ maxSize: options.maxSize ?? 100_000, ttlMs: this.ttlMs });
    this.doneIds = new DoneIds({ maxSize: options.maxSize ?? 100_000, order: compareIds });
    const redis = options.redis ?? null;
    this.redis = redis
      ? registerScripts<IdempotencyScripts, Redis | Cluster>(redis, IDEMPOTENCY_SCRIPTS)
      : null;
    this.cluster = !!redis && (redis as { isCluster?: boolean }).isCluster === true;
  }

  get hasL2(): boolean {
    return this.redis !== null;
  }

  /** The L2 record of `key`. */
  record(key: string): string {
    return this.keyPrefix + key;
  }

  /** Checks `keys` and marks those free as in progress, with one round trip to L2 (per slot). */
  async begin(keys: readonly string[], lockMs = this.lockMs): Promise<BeginResult> {
    const states: IdempotencyState[] = new Array(keys.length);
    const token = this.redis ? `p:${randomUUID()}` : `p:${++localTokens}`;
    const ask: number[] = [];
    keys.forEach((key, i) => {
      const local = this.l1.get(key);
      if (local === DONE) states[i] = 'done';
      else if (local !== undefined) states[i] = 'processing';
      else if (!this.redis) {
        this.l1.set(key, token, lockMs);
        states[i] = 'acquired';
      } else ask.push(i);
    });
    const lockLeftMs: (number | undefined)[] = [];
    if (ask.length === 0) return { token, states, doneInL2: 0, lockLeftMs };
    let doneInL2 = 0;
    // Held locally while L2 answers, so that the same key in a concurrent batch waits its turn.
    for (const i of ask) this.l1.set(keys[i], token, lockMs);
    try {
      await Promise.all(
        this.bySlot(ask, keys).map(async (group) => {
          const answers = await this.redis!.sbaIdemBegin(
            group.length,
            ...group.map((i) => this.record(keys[i])),
            token,
            lockMs,
          );
          group.forEach((i, n) => {
            const answer = Number(answers[n]);
            if (answer === 0) states[i] = 'acquired';
            else if (answer === 1) {
              states[i] = 'done';
              doneInL2++;
              this.l1.set(keys[i], DONE, this.ttlMs);
            } else {
              states[i] = 'processing';
              lockLeftMs[i] = answer - 2;
              this.l1.delete(keys[i]);
            }
          });
        }),
      );
    } catch (err) {
      for (const i of ask) if (this.l1.get(keys[i]) === token) this.l1.delete(keys[i]);
      throw err;
    }
    return { token, states, doneInL2, lockLeftMs };
  }

  /** Marks `done` processed and forgets `failed` (so that their retry runs): one round trip to L2 (per slot). */
  async finish(
    token: string,
    done: readonly string[],
    failed: readonly string[],
    ttlMs = this.ttlMs,
  ): Promise<void> {
    for (const key of done) this.l1.set(key, DONE, ttlMs);
    for (const key of failed) if (this.l1.get(key) === token) this.l1.delete(key);
    if (!this.redis || done.length + failed.length === 0) return;
    const all = [...done, ...failed];
    const indexes = all.map((_, i) => i);
    await Promise.all(
      this.bySlot(indexes, all).map((group) => {
        const doneHere = group.filter((i) => i < done.length);
        const failedHere = group.filter((i) => i >= done.length);
        const records = [...doneHere, ...failedHere].map((i) => this.record(all[i]));
        return this.redis!.sbaIdemFinish(records.length, ...records, token, ttlMs, doneHere.length);
      }),
    );
  }

  /**
   * `begin` for entries of one stream under the default key (`<scope>:<id>`, scope
   * `<group>:<stream>`), which one run holds at a time without a mark of ours: the pending entries
   * list gives an entry to one consumer, the claim heartbeat keeps it there while its handler
   * runs, and a process runs an id once at a time. So nothing is written here: L1, then L2 only
   * where a done mark can exist. A first delivery above the scope's greatest done id (one small
   * GET per batch) is new; below it (the consumer group was created again at an earlier id) and
   * for redeliveries, one look into the done sets per slice of ids, and one into the records that
   * an effect script marked done (`IDEMPOTENT_EFFECT_LUA`) or that another run holds in progress
   * (`begin`'s token: counted as in progress).
   */
  async beginOwned(scope: string, entries: readonly OwnedEntry[]): Promise<BeginResult> {
    const ids = entries.map((e) => e.id);
    const states: IdempotencyState[] = new Array(ids.length);
    const token = this.redis ? `p:${randomUUID()}` : `p:${++localTokens}`;
    const lockLeftMs: (number | undefined)[] = [];
    const known = this.doneIds.hasMany(scope, ids);
    const fresh: number[] = [];
    const again: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      if (known[i]) states[i] = 'done';
      else if (!this.redis) states[i] = 'acquired';
      else if (entries[i].deliveries > 1) again.push(i);
      else fresh.push(i);
    }
    if (fresh.length + again.length === 0) return { token, states, doneInL2: 0, lockLeftMs };
    const maxKey = this.shortcut(scope) ? doneMaxKey(this.keyPrefix, scope) : null;
    if (fresh.length > 0 && maxKey) {
      const max = await this.redis!.get(maxKey);
      for (const i of fresh) {
        if (max !== null && compareIds(ids[i], max) <= 0) again.push(i);
        else states[i] = 'acquired';
      }
    } else again.push(...fresh);
    if (again.length === 0) return { token, states, doneInL2: 0, lockLeftMs };
    const doneInL2 = await this.lookUp(scope, ids, again, states);
    return { token, states, doneInL2, lockLeftMs };
  }

  /**
   * `finish` for the entries of `beginOwned`: marks `ids` done in L1 and in L2 (one script call
   * per slice of ids: they join the slice's set, which then expires `ttlMs` after its last mark,
   * and the scope's greatest done id). Failed entries need nothing: no mark was written for them.
   */
  async finishOwned(scope: string, ids: readonly string[], ttlMs = this.ttlMs): Promise<void> {
    if (ids.length === 0) return;
    let max = ids[ids.length - 1];
    for (const id of ids) if (compareIds(id, max) > 0) max = id;
    this.doneIds.addMany(scope, ids, ttlMs, max);
    const redis = this.redis;
    if (!redis) return;
    const maxKey = this.shortcut(scope) ? doneMaxKey(this.keyPrefix, scope) : null;
    const all = ids.map((_, i) => i);
    await Promise.all(
      [...bySlice(ids, all)].flatMap(([slice, group]) =>
        chunks(group, IDS_PER_COMMAND).map((part) => {
          const joined = part.map((i) => ids[i]);
          const setKey = doneSetKey(this.keyPrefix, scope, slice);
          return maxKey
            ? redis.sbaIdemMarkDone(2, setKey, maxKey, ttlMs, max, joined.join(','))
            : redis.sbaIdemMarkDone(1, setKey, ttlMs, max, joined.join(','));
        }),
      ),
    );
  }

  /** The done sets and the records of `ask` (indexes of `ids`); sets their states, returns how many are done. */
  private async lookUp(
    scope: string,
    ids: readonly string[],
    ask: number[],
    states: IdempotencyState[],
  ): Promise<number> {
    const redis = this.redis!;
    const inSets = new Array<boolean>(ids.length);
    const records = new Array<string | null>(ids.length);
    const keys = ids.map((id) => `${scope}:${id}`);
    await Promise.all([
      ...[...bySlice(ids, ask)].flatMap(([slice, group]) =>
        chunks(group, IDS_PER_COMMAND).map(async (part) => {
          const found = await redis.smismember(
            doneSetKey(this.keyPrefix, scope, slice),
            ...part.map((i) => ids[i]),
          );
          part.forEach((i, n) => (inSets[i] = Number(found[n]) === 1));
        }),
      ),
      ...this.bySlot(ask, keys).map(async (group) => {
        const values = await redis.mget(...group.map((i) => this.record(keys[i])));
        group.forEach((i, n) => (records[i] = values[n]));
      }),
    ]);
    const done: string[] = [];
    for (const i of ask) {
      const record = records[i];
      if (inSets[i] || record === DONE) {
        states[i] = 'done';
        done.push(ids[i]);
      } else states[i] = record ? 'processing' : 'acquired';
    }
    if (done.length > 0) this.doneIds.addMany(scope, done, this.ttlMs);
    return done.length;
  }

  /**
   * Whether the scope's greatest done id can be written with its done sets in one script: always
   * on a single Redis; on a Cluster when the keys of the scope share a hash slot (a hash tag in
   * the stream's name or in keyPrefix). Otherwise every batch looks into the sets.
   */
  private shortcut(scope: string): boolean {
    if (!this.cluster) return true;
    let same = this.sameSlot.get(scope);
    if (same === undefined) {
      const slot = keySlot(doneMaxKey(this.keyPrefix, scope));
      same = ['0', '1', '2'].every(
        (slice) => keySlot(doneSetKey(this.keyPrefix, scope, slice)) === slot,
      );
      this.sameSlot.set(scope, same);
    }
    return same;
  }

  /** Forgets everything this process remembers (L1). */
  clearLocal(): void {
    this.l1.clear();
    this.doneIds.clear();
  }

  private bySlot(indexes: number[], keys: readonly string[]): number[][] {
    if (!this.cluster) return [indexes];
    const groups = new Map<number, number[]>();
    for (const i of indexes) {
      const slot = keySlot(this.record(keys[i]));
      const group = groups.get(slot);
      if (group) group.push(i);
      else groups.set(slot, [i]);
    }
    return [...groups.values()];
  }
}

function chunks<T>(items: T[], size: number): T[][] {
  if (items.length <= size) return [items];
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
