import { Clock, systemClock } from '../core/clock';
import { defaultCodec, Envelope, EnvelopeCodec, sameEnvelope } from '../core/envelope';
import { L1Cache } from '../core/l1-cache';
import type { FillWatch, ReadOrLockResult, StampedeStore } from '../core/store';
import { LocalLocks } from './local-locks';

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
 * as JSON text, so callers never share a mutable object and behave as with Redis; at most
 * `maxEntries` and `maxBytes` of them (least recently used evicted, like Redis' allkeys-lru).
 */
export class MemoryStore implements StampedeStore {
  readonly name = 'memory';
  readonly distributed = false;
  private readonly entries: L1Cache;
  private readonly locks: LocalLocks;
  private readonly clock: Clock;
  private readonly sweeper: NodeJS.Timeout;

  constructor(options: MemoryStoreOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.entries = new L1Cache(options.codec ?? defaultCodec, {
      maxEntries: options.maxEntries ?? DEFAULT_MEMORY_ENTRIES,
      maxBytes: options.maxBytes ?? DEFAULT_MEMORY_BYTES,
    });
    this.locks = new LocalLocks(this.clock);
    this.sweeper = setInterval(() => this.sweep(), options.sweepIntervalMs ?? 30_000);
    this.sweeper.unref();
  }

  async get<T>(key: string): Promise<Envelope<T> | undefined> {
    return this.read<T>(key);
  }

  async set(key: string, envelope: Envelope, ttlMs: number): Promise<void> {
    const now = this.clock.now();
    this.entries.set(key, envelope, now + ttlMs, now);
  }

  async delete(key: string): Promise<void> {
    this.entries.delete(key);
  }

  async readOrLock<T>(key: string, token: string, lockTtlMs: number): Promise<ReadOrLockResult<T>> {
    const envelope = this.read<T>(key);
    if (envelope) return { kind: 'hit', envelope };
    if (this.locks.tryLock(key, token, lockTtlMs)) return { kind: 'locked' };
    return { kind: 'busy', lockTtlMs: this.locks.remaining(key) ?? 0 };
  }

  async tryLock(
    key: string,
    token: string,
    lockTtlMs: number,
    current?: Envelope,
  ): Promise<boolean> {
    if (current && !sameEnvelope(this.read(key), current)) return false;
    return this.locks.tryLock(key, token, lockTtlMs);
  }

  async extendLock(key: string, token: string, lockTtlMs: number): Promise<boolean> {
    return this.locks.extend(key, token, lockTtlMs);
  }

  async unlock(key: string, token: string): Promise<boolean> {
    return this.locks.release(key, token);
  }

  async fill(key: string, envelope: Envelope, ttlMs: number, token?: string): Promise<void> {
    await this.set(key, envelope, ttlMs);
    if (token) this.locks.release(key, token);
  }

  watch(key: string): FillWatch {
    return this.locks.watch(key);
  }

  notificationsLive(): boolean {
    return true;
  }

  async ping(): Promise<void> {}

  /** Values kept, and their size (characters of encoded values and keys). */
  get stats(): { entries: number; bytes: number } {
    return this.entries.stats;
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.locks.clear();
    this.entries.clear();
  }

  private read<T>(key: string): Envelope<T> | undefined {
    return this.entries.get<T>(key, this.clock.now());
  }

  private sweep(): void {
    this.entries.sweep(this.clock.now());
  }
}
