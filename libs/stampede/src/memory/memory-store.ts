import { Clock, systemClock } from '../core/clock';
import { defaultCodec, Envelope, EnvelopeCodec } from '../core/envelope';
import { L1Cache } from '../core/l1-cache';
import { LocallyLockedStore } from '../core/locally-locked-store';
import { every } from '../core/timers';

export interface MemoryStoreOptions {
  clock?: Clock;
  /** Expired entries are swept this often (ms). Default 30 000. */
  sweepIntervalMs?: number;
  /** How envelopes are kept (as text, so callers never share a mutable object); default JSON. */
  codec?: EnvelopeCodec;
  /** Most values kept; the least recently used go first. Default 100,000. */
  maxEntries?: number;
  /** Most characters of encoded values (and keys) kept, about bytes. Default 128 MB. */
  maxBytes?: number;
}

export const DEFAULT_MEMORY_ENTRIES = 100_000;
export const DEFAULT_MEMORY_BYTES = 128 * 1024 * 1024;

/**
 * The embedded default: values, locks and notifications live in this process. Values are kept
 * as encoded text, so callers never share a mutable object and behave as with Redis; at most
 * `maxEntries` and `maxBytes` of them (least recently used evicted, like Redis' allkeys-lru).
 */
export class MemoryStore extends LocallyLockedStore {
  readonly name = 'memory';
  readonly codec: EnvelopeCodec;
  private readonly entries: L1Cache;
  private readonly clock: Clock;
  private readonly stopSweeping: () => void;

  constructor(options: MemoryStoreOptions = {}) {
    const clock = options.clock ?? systemClock;
    super(clock);
    this.clock = clock;
    this.codec = options.codec ?? defaultCodec;
    this.entries = new L1Cache(this.codec, {
      maxEntries: options.maxEntries ?? DEFAULT_MEMORY_ENTRIES,
      maxBytes: options.maxBytes ?? DEFAULT_MEMORY_BYTES,
    });
    this.stopSweeping = every(clock, options.sweepIntervalMs ?? 30_000, () =>
      this.entries.sweep(this.clock.now()),
    );
  }

  async get<T>(key: string): Promise<Envelope<T> | undefined> {
    return this.entries.get<T>(key, this.clock.now());
  }

  async set(key: string, envelope: Envelope, ttlMs: number): Promise<void> {
    const now = this.clock.now();
    this.entries.set(key, envelope, now + ttlMs, now);
  }

  async delete(key: string): Promise<void> {
    this.entries.delete(key);
  }

  async ping(): Promise<void> {}

  /** Values kept, and their size (characters of encoded values and keys). */
  get stats(): { entries: number; bytes: number } {
    return this.entries.stats;
  }

  override async close(): Promise<void> {
    this.stopSweeping();
    await super.close();
    this.entries.clear();
  }
}
