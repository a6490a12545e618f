import { lockToken } from './lock-token';
import type { Call, EngineLogger, LockOutcome } from './call';
import type { Clock } from './clock';
import { Envelope, graceOf } from './envelope';
import { keyPattern, StampedeEvents } from './events';
import type { Fallback } from './fallback';
import type { HeldValues } from './held-values';
import type { KeyStates } from './key-state';
import type { LoadAndFill } from './load-and-fill';
import type { FillWatch, ReadOrLockResult, StampedeStore } from './store';
import type { StoreGuard } from './store-guard';
import { sleep } from './timers';

/**
 * The lock path of a miss (try, wait, notify): the first caller of a key in this process takes the
 * lock or waits for its holder, re-reading the value on each attempt; the others join it (as they
 * would wait for a holder elsewhere), so a crowd of callers costs one lock attempt and one wait.
 * A waiter sleeps until the holder's fill or release notifies it, polling as the fallback, and
 * loads without the lock once `lock.wait` has passed.
 */
export class LockPath {
  constructor(
    private readonly store: Pick<
      StampedeStore,
      'get' | 'readOrLock' | 'tryLock' | 'watch' | 'notificationsLive'
    >,
    private readonly keys: KeyStates,
    private readonly guard: StoreGuard,
    private readonly held: HeldValues,
    private readonly fill: LoadAndFill,
    private readonly fallback: Fallback,
    private readonly clock: Clock,
    private readonly events: StampedeEvents,
    private readonly logger?: EngineLogger,
  ) {}

  /** Past its expiry and grace on this clock. */
  private expired(envelope: Envelope<unknown>, policyGrace: number): boolean {
    return this.clock.now() >= envelope.e + graceOf(envelope, policyGrace);
  }

  /** A store read shared by the lock-path callers of `key` in this process. */
  read<T>(key: string): Promise<Envelope<T> | undefined> {
    return this.keys.share(key, 'read', () => this.store.get(key)).promise as Promise<
      Envelope<T> | undefined
    >;
  }

  load<T>(call: Call<T>): Promise<LockOutcome<T>> {
    const run = this.keys.share(call.key, 'lock', () => this.lockAndLoad(call));
    const promise = run.promise as Promise<LockOutcome<T>>;
    if (!run.joined) return promise;
    call.m.joins++;
    return promise.then((o) => ({ value: o.value, waited: o.waited, loaded: false, joined: true }));
  }

  /**
   * The lock path of a caller that holds the key's `lock` slot itself and made a first attempt
   * already (getOrLoadMany sends the first attempts of its keys together), which found the lock
   * taken: it watches the key, then tries again as a registered waiter.
   */
  waitAndLoad<T>(call: Call<T>): Promise<LockOutcome<T>> {
    return this.lockAndLoad(call, true);
  }

  private async lockAndLoad<T>(call: Call<T>, attempted = false): Promise<LockOutcome<T>> {
    const { key, m, e } = call;
    const lock = call.policy.lock!;
    const token = lockToken();
    const deadline = this.clock.now() + lock.wait;
    let waitStart: number | undefined;
    let waited = false;
    /** Ends a wait; returns how long it lasted. */
    const endWait = () => {
      if (waitStart === undefined) return 0;
      const ms = this.clock.now() - waitStart;
      m.lockWaitMs += ms;
      e.telemetry.lockWaited(ms);
      waitStart = undefined;
      return ms;
    };
    const served = (value: T, loaded = false): LockOutcome<T> => ({ value, waited, loaded });
    // A first attempt costs no subscription; a caller that must wait watches the key, then
    // tries again as a registered waiter, so the holder's fill notifies it.
    let watch: FillWatch | undefined;
    let live = false;
    const stopWatching = () => {
      watch?.cancel();
      watch = undefined;
    };
    try {
      if (attempted) {
        watch = this.store.watch(key);
        live = await watch.ready;
      }
      for (;;) {
        let step: ReadOrLockResult<T>;
        const wasDown = this.guard.down;
        try {
          step = await this.store.readOrLock<T>(key, token, lock.ttl, watch !== undefined);
        } catch (err) {
          endWait();
          const fallback = await this.fallback.serve(call, err);
          return served(fallback.value, fallback.loaded);
        }
        if (wasDown) this.guard.answered();
        if (step.kind === 'hit') {
          const envelope = await this.held.usable(key, step.envelope, call.policy.grace);
          if (!envelope) continue;
          if (!this.expired(envelope, call.policy.grace)) {
            endWait();
            this.held.hold(call, envelope);
            return served(envelope.v);
          }
          // Expired, and kept in the store while a refresh runs: wait for its fill.
          if (step.refreshTtlMs !== undefined)
            step = { kind: 'busy', lockTtlMs: step.refreshTtlMs };
          else {
            // Expired and nobody refreshes it: take the refresh's lock and load.
            let locked;
            try {
              locked = await this.store.tryLock(key, token, lock.ttl, envelope);
            } catch (err) {
              endWait();
              const fallback = await this.fallback.serve(call, err);
              return served(fallback.value, fallback.loaded);
            }
            if (locked) {
              endWait();
              stopWatching();
              return served(await this.fill.run(call, token), true);
            }
            // Someone took it meanwhile: sleep one poll, then wait for that refresh as above.
            step = { kind: 'busy', lockTtlMs: 0 };
          }
        }
        if (step.kind === 'locked') {
          endWait();
          stopWatching();
          return served(await this.fill.run(call, step.token ?? token), true);
        }
        const now = this.clock.now();
        if (waitStart === undefined) {
          waitStart = now;
          waited = true;
          m.lockWaits++;
        }
        const remaining = deadline - now;
        if (remaining <= 0) {
          const waitedMs = endWait();
          stopWatching();
          m.lockTimeouts++;
          this.logger?.warn(`waited ${lock.wait} ms for the lock of "${key}"; loading without it`);
          this.events.emit('stampede.lock.timeout', {
            method: e.label,
            keyPattern: keyPattern(key),
            waitedMs,
          });
          return served(await this.fill.run(call), true);
        }
        if (!watch) {
          watch = this.store.watch(key);
          live = await watch.ready;
          continue;
        }
        // Notified waiters sleep until the holder's lock would expire; polling is the fallback.
        const lockLeft = step.lockTtlMs >= 0 ? step.lockTtlMs + lock.poll : lock.ttl;
        const notifiable = live && this.store.notificationsLive();
        const nap = sleep(this.clock, Math.min(notifiable ? lockLeft : lock.poll, remaining));
        const notified = await Promise.race([
          watch.done.then(() => true),
          nap.done.then(() => false),
        ]);
        nap.cancel();
        // Re-arm before reading, so that a release seen as a miss below is not missed after it.
        watch.cancel();
        watch = this.store.watch(key);
        live = await watch.ready;
        if (!notified) continue;
        // Woken by a fill: the waiters of this process share one read of the new value.
        try {
          const envelope = await this.held.usable(key, await this.read<T>(key), call.policy.grace);
          if (envelope) {
            endWait();
            this.held.hold(call, envelope);
            return served(envelope.v);
          }
        } catch (err) {
          endWait();
          const fallback = await this.fallback.serve(call, err);
          return served(fallback.value, fallback.loaded);
        }
      }
    } finally {
      stopWatching();
    }
  }
}
