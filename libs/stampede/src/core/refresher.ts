import { lockToken } from './lock-token';
import { Call, EngineLogger, messageOf, Outcome } from './call';
import type { Clock } from './clock';
import { Envelope, graceOf } from './envelope';
import { keyPattern, StampedeEvents } from './events';
import type { KeyStates } from './key-state';
import type { LoadAndFill } from './load-and-fill';
import type { LockStore } from './store';
import type { TracedCall } from './telemetry';
import { sleep } from './timers';
import type { EarlyRecomputeSchedule } from './xfetch';

const WARNING_INTERVAL_MS = 10_000;

/**
 * Background refreshes: XFetch's early recomputation of a fresh value, and the refresh of a stale
 * one within grace (stale-while-revalidate). One per key here, one across instances with a lock;
 * after a failure the key is left alone for `graceBackoff`, and a stale value keeps being served
 * (fail-safe) until grace ends.
 */
export class Refresher {
  private readonly background = new Set<Promise<unknown>>();
  private closed = false;
  private lastWarning = 0;
  private failuresUnreported = 0;

  constructor(
    private readonly store: Pick<LockStore, 'tryLock'>,
    private readonly keys: KeyStates,
    private readonly fill: LoadAndFill,
    private readonly schedule: EarlyRecomputeSchedule,
    private readonly clock: Clock,
    private readonly events: StampedeEvents,
    private readonly logger?: EngineLogger,
  ) {}

  /** Starts an early recomputation of a fresh `envelope` when XFetch says it is due. */
  maybeEarly<T>(call: Call<T>, envelope: Envelope<T>): void {
    const { key, policy } = call;
    if (!policy.xfetch || this.closed || this.keys.isRefreshing(key)) return;
    // Never before half the TTL: a load time inflated by a stalled event loop would otherwise
    // make a value due as soon as it is stored, and the key would be refreshed twice per TTL.
    const due = this.schedule.due(key, envelope, policy.xfetch.beta, policy.ttl / 2);
    if (this.clock.now() < due) return;
    void this.inBackground(call, envelope, true);
  }

  /**
   * Within grace: one refresh runs in the background while callers get the stale value, at once
   * or, with a soft timeout, once the refresh has had that long to answer.
   */
  async serveStale<T>(call: Call<T>, stale: Envelope<T>): Promise<Outcome<T>> {
    const refresh = this.inBackground(call, stale, false);
    const soft = call.policy.timeout?.soft;
    if (refresh && soft) {
      const nap = sleep(this.clock, soft);
      const fresh = await Promise.race([refresh, nap.done.then(() => undefined)]);
      nap.cancel();
      if (fresh) return { value: fresh.value, hit: false };
    }
    return { value: stale.v, hit: true, stale: true };
  }

  /**
   * Refreshes `current` in the background (a try-lock that declines if the value changed since it
   * was read). Resolves with the new value, or undefined when this instance does not refresh.
   */
  inBackground<T>(
    call: Call<T>,
    current: Envelope<T>,
    early: boolean,
  ): Promise<{ value: T } | undefined> | undefined {
    const { key, policy, m } = call;
    if (this.closed) return undefined;
    const now = this.clock.now();
    if (this.keys.isRefreshing(key)) {
      const running = this.keys.get(key)?.refreshLoad as Promise<T> | undefined;
      return running?.then(
        (value) => ({ value }),
        () => undefined,
      );
    }
    if (this.keys.backingOff(key, now)) return undefined;
    this.keys.startRefresh(key);
    const task = (async (): Promise<{ value: T } | undefined> => {
      let token: string | undefined;
      let release = true;
      let span: TracedCall | undefined;
      try {
        if (policy.lock) {
          token = lockToken();
          if (!(await this.store.tryLock(key, token, policy.lock.ttl, current))) {
            // Another instance refreshes: stay quiet here until the current value expires
            // (within grace: for one backoff, in case that refresh fails).
            release = false;
            const quietMs = early ? Math.max(0, current.e - now) : policy.graceBackoff;
            const quiet = sleep(this.clock, Math.min(quietMs, policy.lock.ttl));
            void quiet.done.then(() => this.keys.endRefresh(key));
            return undefined;
          }
        }
        if (early) m.earlyRecomputes++;
        span = call.e.telemetry.start(key, true);
        const load = span ? span.run(() => this.fill.run(call, token)) : this.fill.run(call, token);
        this.keys.setRefreshLoad(key, load);
        try {
          const value = await load;
          this.keys.backOff(key, undefined);
          span?.end('none', false, true, false);
          return { value };
        } finally {
          this.keys.setRefreshLoad(key, undefined);
        }
      } catch (err) {
        span?.end('none', false, true, false, err);
        if (!early) {
          m.failSafes++;
          const until = current.e + graceOf(current, policy.grace);
          this.keys.noteFailSafe(key, call.e.label, this.clock.now(), until);
          this.events.emit('stampede.failsafe', {
            method: call.e.label,
            keyPattern: keyPattern(key),
            error: messageOf(err),
          });
        }
        this.keys.backOff(key, this.clock.now() + policy.graceBackoff);
        this.noteFailure(key, err, early);
        return undefined;
      } finally {
        if (release) this.keys.endRefresh(key);
      }
    })();
    this.background.add(task);
    void task.finally(() => this.background.delete(task));
    return task;
  }

  /** Waits for the refreshes running; later calls start none. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.background]);
  }

  /** At most one warning per 10 s, like the store's; it says how many failures it stands for. */
  private noteFailure(key: string, err: unknown, early: boolean): void {
    this.failuresUnreported++;
    const now = this.clock.now();
    if (now - this.lastWarning < WARNING_INTERVAL_MS) return;
    this.lastWarning = now;
    const others = this.failuresUnreported - 1;
    this.failuresUnreported = 0;
    this.logger?.warn(
      `${early ? 'early recomputation' : 'refresh within grace'} of "${key}" failed: ${messageOf(err)}; ` +
        `the current value is kept` +
        (others > 0 ? ` (and ${others} more failed recomputation(s) since the last warning)` : ''),
    );
  }
}
