import { Clock, systemClock } from '../core/clock';
import { defaultCodec, Envelope, EnvelopeCodec } from '../core/envelope';
import { LocallyLockedStore } from '../core/locally-locked-store';

/** The part of a cache-manager 6/7 `Cache` (as injected with CACHE_MANAGER) that is used. */
export interface CacheManagerLike {
  get<T>(key: string): Promise<T | undefined | null>;
  set<T>(key: string, value: T, ttl?: number): Promise<unknown>;
  del(key: string): Promise<unknown>;
  /** cache-manager 6/7 have it: one call for many keys. */
  mget?<T>(keys: string[]): Promise<(T | undefined | null)[]>;
}

/**
 * Stores values in an existing cache-manager `Cache` (for apps on @nestjs/cache-manager).
 * cache-manager has no atomic lock, so locks and notifications stay in this process:
 * @DistLock then coalesces loads per instance only.
 */
export class CacheManagerStore extends LocallyLockedStore {
  readonly name = 'cache-manager';

  constructor(
    private readonly cache: CacheManagerLike,
    clock: Clock = systemClock,
    readonly codec: EnvelopeCodec = defaultCodec,
  ) {
    super(clock);
  }

  async get<T>(key: string): Promise<Envelope<T> | undefined> {
    return this.codec.decode<T>(await this.cache.get<string>(key));
  }

  override async getMany<T>(keys: string[]): Promise<(Envelope<T> | undefined)[]> {
    if (!this.cache.mget) return super.getMany<T>(keys);
    const raws = await this.cache.mget<string>(keys);
    return keys.map((_, i) => this.codec.decode<T>(raws[i]));
  }

  async set(key: string, envelope: Envelope, ttlMs: number, raw?: string): Promise<void> {
    await this.cache.set(key, raw ?? this.codec.encode(envelope), ttlMs);
  }

  async delete(key: string): Promise<void> {
    await this.cache.del(key);
  }

  async ping(): Promise<void> {
    await this.cache.get('stampede:ping');
  }
}
