import type { Envelope } from './envelope';

/**
 * The values this process has seen recently (read from the store, or loaded), kept until their
 * expiry, at most `maxEntries` (the least recently seen go first). While the store is
 * unreachable, a caller gets such a value instead of a backend call: it is exactly what the
 * store would have answered.
 */
export class LastKnownValues {
  private readonly entries = new Map<string, Envelope>();

  constructor(private readonly maxEntries = 10_000) {}

  remember(key: string, envelope: Envelope): void {
    this.entries.delete(key);
    this.entries.set(key, envelope);
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  /** The value of `key` if it has not expired at `now` (or is stale by less than `grace` ms). */
  fresh<T>(key: string, now: number, grace = 0): Envelope<T> | undefined {
    const envelope = this.entries.get(key);
    if (!envelope) return undefined;
    if (envelope.e + grace > now) return envelope as Envelope<T>;
    this.entries.delete(key);
    return undefined;
  }

  forget(key: string): void {
    this.entries.delete(key);
  }
}
