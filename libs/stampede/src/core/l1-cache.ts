import type { Envelope, EnvelopeCodec } from './envelope';
import { SizedLru } from './sized-lru';

export interface L1Limits {
  /** Most entries kept. */
  maxEntries: number;
  /** Most characters of encoded values kept (about bytes for ASCII JSON). */
  maxBytes: number;
  /**
   * While invalidations cannot be received (the store's subscriber is down), the longest an
   * entry or a tag version is trusted without reading the store again (ms). Default 5000 (see
   * invalidation-bus.ts, which also applies it to tag versions without L1).
   */
  maxStaleMs?: number;
  /**
   * Hits return one decoded copy of the value, deep-frozen and shared by every caller, instead of
   * decoding a fresh copy each (see L1Cache). Default false.
   */
  shared?: boolean;
}

interface Entry {
  /** The value's own text (not the envelope's: a hit decodes only what it returns). */
  text?: string;
  /** With `shared`: the value, decoded once and frozen. */
  value?: unknown;
  /** The envelope's load time (XFetch's delta). */
  d: number;
  /** The envelope's expiry: fresh before it. */
  e: number;
  /** Kept (stale, for fail-safe) until then: the end of grace. */
  keepUntil: number;
  /** When the value was stored or read from the store (what it agreed with the store). */
  verifiedAt: number;
  tags?: Record<string, number>;
  /** The value's own grace, when it has one. */
  g?: number;
}

/**
 * An LRU of encoded values with their envelopes' fields, bounded by entries and by size: the
 * in-process tier (L1), and the in-memory store's values. Values are kept as text and decoded on
 * each hit, so callers never share a mutable object. With `shared`, a value is decoded once when
 * it is kept, frozen (plain objects and arrays, deeply), and that one copy is returned on every
 * hit: no decoding per hit, for callers that do not change what they get.
 */
export class L1Cache {
  private readonly entries: SizedLru<Entry>;
  private readonly shared: boolean;

  constructor(
    private readonly codec: EnvelopeCodec,
    limits: L1Limits,
  ) {
    this.entries = new SizedLru(limits.maxEntries, limits.maxBytes);
    this.shared = limits.shared === true;
  }

  /**
   * The envelope of `key`, fresh or stale, if kept at `now`; with `verifiedAfter`, only if it was
   * stored or read from the store since (an older entry stays, for when the store fails).
   */
  get<T>(key: string, now: number, verifiedAfter?: number): Envelope<T> | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.keepUntil <= now) {
      this.entries.delete(key);
      return undefined;
    }
    if (verifiedAfter !== undefined && entry.verifiedAt <= verifiedAfter) return undefined;
    let v: T;
    if (entry.text === undefined) v = entry.value as T;
    else {
      try {
        v = this.codec.decodeValue<T>(entry.text);
      } catch {
        this.entries.delete(key); // the serializer cannot read its own text: a miss
        return undefined;
      }
    }
    const envelope: Envelope<T> = { v, d: entry.d, e: entry.e };
    if (entry.tags) envelope.t = entry.tags;
    if (entry.g !== undefined) envelope.g = entry.g;
    return envelope;
  }

  /** Keeps `envelope` (stored or read from the store at `now`) until `keepUntil`. */
  set(key: string, envelope: Envelope, keepUntil: number, now: number): void {
    const text = this.codec.encodeValue(envelope.v);
    let value: unknown;
    if (this.shared) {
      // Decoded from its text, so that a hit returns what a store hit would (a Date as its string).
      try {
        value = deepFreeze(this.codec.decodeValue(text));
      } catch {
        this.entries.delete(key); // the serializer cannot read its own text: not kept
        return;
      }
    }
    const entry: Entry = {
      text: this.shared ? undefined : text,
      value,
      d: envelope.d,
      e: envelope.e,
      keepUntil,
      verifiedAt: now,
      tags: envelope.t,
      g: envelope.g,
    };
    this.entries.set(key, entry, text.length + key.length);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  /** Drops the entries stamped with an older version of one of `tags`. */
  dropTagged(tags: Record<string, number>): void {
    this.entries.deleteWhere(
      (entry) =>
        entry.tags !== undefined &&
        Object.entries(tags).some(
          ([tag, version]) => tag in entry.tags! && entry.tags![tag] < version,
        ),
    );
  }

  /** Drops the entries kept no longer at `now`. */
  sweep(now: number): void {
    this.entries.deleteWhere((entry) => entry.keepUntil <= now);
  }

  clear(): void {
    this.entries.clear();
  }

  get stats(): { entries: number; bytes: number } {
    return this.entries.stats;
  }
}

/** Freezes `value` and the plain objects and arrays it holds; returns it. */
function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return value;
  Object.freeze(value);
  for (const item of Object.values(value)) deepFreeze(item);
  return value;
}
