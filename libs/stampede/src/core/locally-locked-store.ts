import type { Clock } from './clock';
import { Envelope, sameEnvelope } from './envelope';
import { LocalLocks } from './local-locks';
import type { FillWatch, ReadOrLockResult, StampedeStore } from './store';

/**
 * A values-only store made whole with locks and fill notifications in this process: the
 * in-memory store and the cache-manager store. A subclass provides the values; locks coalesce
 * loads per process only, since such a backend has no atomic lock.
 */
export abstract class LocallyLockedStore implements StampedeStore {
  abstract readonly name: string;
  readonly distributed = false;
  protected readonly locks: LocalLocks;

  protected constructor(clock: Clock) {
    this.locks = new LocalLocks(clock);
  }

  abstract get<T>(key: string): Promise<Envelope<T> | undefined>;
  abstract set(key: string, envelope: Envelope, ttlMs: number, raw?: string): Promise<void>;
  abstract delete(key: string): Promise<void>;
  abstract ping(): Promise<void>;

  getMany<T>(keys: string[]): Promise<(Envelope<T> | undefined)[]> {
    return Promise.all(keys.map((key) => this.get<T>(key)));
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

  async close(): Promise<void> {
    this.locks.clear();
  }
}
