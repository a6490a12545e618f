import type { Envelope, EnvelopeCodec } from './envelope';

export interface L1Limits {
  /** Most entries kept. */
  maxEntries: number;
  /** Most characters of encoded values kept (about bytes for ASCII JSON). */
  maxBytes: number;
}

interface Entry {
  raw: string;
  /** The envelope's expiry: fresh before it. */
  e: number;
  /** Kept (stale, for fail-safe) until then: the end of grace. */
  keepUntil: number;
  tags?: Record<string, number>;
}

/**
 * The in-process tier: an LRU of encoded envelopes, bounded by entries and by size. Values are
 * kept as text and decoded on each hit, so callers never share a mutable object.
 */
export class L1Cache {
  private readonly entries = new Map<string, Entry>();
  private size = 0;

  constructor(
    private readonly codec: EnvelopeCodec,
    private readonly limits: L1Limits,
  ) {}

  /** The envelope of `key`, fresh or stale, if kept at `now`. */
  get<T>(key: string, now: number): Envelope<T> | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.keepUntil <= now) {
      this.delete(key);
      return undefined;
    }
    this.entries.delete(key); // most recently used last
    this.entries.set(key, entry);
    return this.codec.decode<T>(entry.raw);
  }

  set(key: string, envelope: Envelope, keepUntil: number, raw = this.codec.encode(envelope)): void {
    this.delete(key);
    const cost = raw.length + key.length;
    if (cost > this.limits.maxBytes) return;
    this.entries.set(key, { raw, e: envelope.e, keepUntil, tags: envelope.t });
    this.size += cost;
    while (this.entries.size > this.limits.maxEntries || this.size > this.limits.maxBytes) {
      this.delete(this.entries.keys().next().value as string);
    }
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.size -= entry.raw.length + key.length;
  }

  /** Drops the entries stamped with an older version of one of `tags`. */
  dropTagged(tags: Record<string, number>): void {
    for (const [key, entry] of this.entries) {
      if (!entry.tags) continue;
      for (const [tag, version] of Object.entries(tags)) {
        if (tag in entry.tags && entry.tags[tag] < version) {
          this.delete(key);
          break;
        }
      }
    }
  }

  clear(): void {
    this.entries.clear();
    this.size = 0;
  }

  get stats(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.size };
  }
}
