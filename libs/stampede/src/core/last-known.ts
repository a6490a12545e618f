import type { Envelope } from './envelope';
import { SizedLru } from './sized-lru';

export const DEFAULT_LAST_KNOWN_ENTRIES = 10_000;
export const DEFAULT_LAST_KNOWN_BYTES = 16 * 1024 * 1024;

/**
 * The values this process has seen recently (read from the store, or loaded), kept until their
 * expiry, at most `maxEntries` and `maxBytes` (characters of their encoded text and keys; the
 * least recently seen go first). While the store is unreachable, a caller gets such a value
 * instead of a backend call: it is exactly what the store would have answered.
 */
export class LastKnownValues {
  private readonly entries: SizedLru<Envelope>;

  constructor(maxEntries = DEFAULT_LAST_KNOWN_ENTRIES, maxBytes = DEFAULT_LAST_KNOWN_BYTES) {
    this.entries = new SizedLru(maxEntries, maxBytes);
  }

  /** Keeps `envelope`, whose encoded text is `size` characters long. */
  remember(key: string, envelope: Envelope, size: number): void {
    this.entries.set(key, envelope, size + key.length);
  }

  /** The value of `key` if it has not expired at `now` (or is stale by less than its grace, else `grace`, ms). */
  fresh<T>(key: string, now: number, grace = 0): Envelope<T> | undefined {
    const envelope = this.entries.peek(key);
    if (!envelope) return undefined;
    if (envelope.e + (envelope.g ?? grace) > now) return envelope as Envelope<T>;
    this.entries.delete(key);
    return undefined;
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  get stats(): { entries: number; bytes: number } {
    return this.entries.stats;
  }
}
