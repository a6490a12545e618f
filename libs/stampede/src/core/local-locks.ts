import type { Clock } from './clock';
import type { FillWatch } from './store';

/** Locks and fill notifications inside one process: used by the in-memory and cache-manager stores. */
export class LocalLocks {
  private readonly locks = new Map<string, { token: string; expiresAt: number }>();
  private readonly watchers = new Map<string, Set<() => void>>();

  constructor(private readonly clock: Clock) {}

  /** Remaining ms of the live lock on `key`, or undefined when it is free. */
  remaining(key: string): number | undefined {
    const lock = this.locks.get(key);
    if (!lock) return undefined;
    const left = lock.expiresAt - this.clock.now();
    if (left > 0) return left;
    this.locks.delete(key);
    return undefined;
  }

  tryLock(key: string, token: string, ttlMs: number): boolean {
    if (this.remaining(key) !== undefined) return false;
    this.locks.set(key, { token, expiresAt: this.clock.now() + ttlMs });
    return true;
  }

  extend(key: string, token: string, ttlMs: number): boolean {
    if (this.remaining(key) === undefined || this.locks.get(key)!.token !== token) return false;
    this.locks.get(key)!.expiresAt = this.clock.now() + ttlMs;
    return true;
  }

  /** Releases the lock if `token` holds it; wakes the waiters either way (the caller filled or gave up). */
  release(key: string, token: string): boolean {
    const held = this.remaining(key) !== undefined && this.locks.get(key)!.token === token;
    if (held) this.locks.delete(key);
    this.notify(key);
    return held;
  }

  notify(key: string): void {
    const set = this.watchers.get(key);
    if (!set) return;
    this.watchers.delete(key);
    for (const wake of set) wake();
  }

  watch(key: string): FillWatch {
    let wake!: () => void;
    const done = new Promise<void>((resolve) => (wake = resolve));
    let set = this.watchers.get(key);
    if (!set) {
      set = new Set();
      this.watchers.set(key, set);
    }
    set.add(wake);
    return {
      ready: Promise.resolve(true),
      done,
      cancel: () => {
        const current = this.watchers.get(key);
        current?.delete(wake);
        if (current && current.size === 0) this.watchers.delete(key);
        wake();
      },
    };
  }

  clear(): void {
    this.locks.clear();
    for (const key of [...this.watchers.keys()]) this.notify(key);
  }
}
