import { Clock, systemClock } from '../core/clock';
import { defaultCodec, Envelope, EnvelopeCodec, sameEnvelope } from '../core/envelope';
import type { FillWatch, ReadOrLockResult, StampedeStore } from '../core/store';
import { LocalLocks } from '../memory/local-locks';

/** The part of a cache-manager 6/7 `Cache` (as injected with CACHE_MANAGER) that is used. */
export interface CacheManagerLike {
  get<T>(key: string): Promise<T | undefined | null>;
  set<T>(key: string, value: T, ttl?: number): Promise<unknown>;
  del(key: string): Promise<unknown>;
}

/**
 * Stores values in an existing cache-manager `Cache` (for apps on @nestjs/cache-manager).
 * cache-manager has no atomic lock, so locks and notifications stay in this process:
 * @DistLock then coalesces loads per instance only.
 */
export class CacheManagerStore implements StampedeStore {
  readonly name = 'cache-manager';
  readonly distributed = false;
  private readonly locks: LocalLocks;

  constructor(
    private readonly cache: CacheManagerLike,
    clock: Clock = systemClock,
    readonly codec: EnvelopeCodec = defaultCodec,
  ) {
    this.locks = new LocalLocks(clock);
  }

  async get<T>(key: string): Promise<Envelope<T> | undefined> {
    return this.codec.decode<T>(await this.cache.get<string>(key));
  }

  async set(key: string, envelope: Envelope, ttlMs: number, raw?: string): Promise<void> {
    await this.cache.set(key, raw ?? this.codec.encode(envelope), ttlMs);
  }

  async delete(key: string): Promise<void> {
    await this.cache.del(key);
  }

  async readOrLock<T>(key: string, token: string, lockTtlMs: number): Promise<ReadOrLockResult<T>> {
    const envelope = await this.get<T>(key);
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
    if (current && !sameEnvelope(await this.get(key), current)) return false;
    return this.locks.tryLock(key, token, lockTtlMs);
  }

  async extendLock(key: string, token: string, lockTtlMs: number): Promise<boolean> {
    return this.locks.extend(key, token, lockTtlMs);
  }

  async unlock(key: string, token: string): Promise<boolean> {
    return this.locks.release(key, token);
  }

  async fill(
    key: string,
    envelope: Envelope,
    ttlMs: number,
    token?: string,
    raw?: string,
  ): Promise<void> {
    try {
      await this.set(key, envelope, ttlMs, raw);
    } finally {
      if (token) this.locks.release(key, token);
    }
  }

  watch(key: string): FillWatch {
    return this.locks.watch(key);
  }

  notificationsLive(): boolean {
    return true;
  }

  async ping(): Promise<void> {
    await this.cache.get('stampede:ping');
  }

  async close(): Promise<void> {
    this.locks.clear();
  }
}
