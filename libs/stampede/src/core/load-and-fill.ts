import { Call, encodeFor, envelopeOf, storable } from './call';
import type { Clock, RandomSource } from './clock';
import type { Envelope, EnvelopeCodec } from './envelope';
import type { HeldValues } from './held-values';
import { jitterTtl } from './jitter';
import type { KeyStates } from './key-state';
import { LoadContext, loadSettings } from './load-context';
import type { LoaderRun } from './loader-run';
import type { StampedeStore } from './store';
import type { StoreGuard } from './store-guard';
import type { TagStamps } from './tag-stamps';
import { every } from './timers';
import type { EarlyRecomputeSchedule } from './xfetch';

const noop = () => undefined;

/**
 * Run, fill, release: runs the loader and stores its value (kept `ttl + grace`); with a lock
 * token, the same store step releases the lock. Past the hard timeout the caller gets a
 * StampedeTimeoutError, while the load may still finish and fill the cache.
 */
export class LoadAndFill {
  constructor(
    private readonly store: Pick<
      StampedeStore,
      'fill' | 'unlock' | 'extendLock' | 'codec' | 'distributed'
    >,
    private readonly loader: LoaderRun,
    private readonly held: HeldValues,
    private readonly schedule: EarlyRecomputeSchedule,
    private readonly guard: StoreGuard,
    private readonly keys: KeyStates,
    private readonly codec: EnvelopeCodec,
    private readonly clock: Clock,
    private readonly random: RandomSource,
    /** Stamps the tags a loader adds through its LoadContext. */
    private readonly tagStamps?: Pick<TagStamps, 'stamp'>,
  ) {}

  run<T>(call: Call<T>, token?: string): Promise<T> {
    const { key, policy, e } = call;
    const stopExtending =
      token && policy.lock?.autoExtend ? this.keepLocked(key, token, policy.lock.ttl) : undefined;
    const started = this.clock.now();
    const controller = new AbortController();
    const context = new LoadContext(key, controller.signal);
    const loaded = this.loader.run(call.loader, e, controller, policy, context);
    // The value is stored even when the callers gave up on it (hard timeout).
    const stored = loaded.then(
      async (value) => {
        stopExtending?.();
        this.keys.clearFailSafe(key);
        await this.fill(call, value, started, context, token);
        return value;
      },
      async (err: unknown) => {
        stopExtending?.();
        if (token) await this.store.unlock(key, token).catch(noop);
        throw err;
      },
    );
    stored.catch(noop); // observed below, unless the hard timeout came first
    if (!policy.timeout?.hard) return stored;
    return this.loader.bounded(loaded, call, controller).then(() => stored);
  }

  private async fill<T>(
    call: Call<T>,
    value: T,
    started: number,
    context: LoadContext,
    token?: string,
  ): Promise<void> {
    const { key, policy, m } = call;
    const wasDown = this.guard.down;
    let keep = false;
    let ttl: number;
    let grace: number;
    let envelope: Envelope<T>;
    let raw: string | undefined;
    try {
      // What the loader set through its context wins over the policy (adaptive TTL).
      const settings = loadSettings(context, call.e.label);
      keep = !settings.skip && storable(value, policy);
      let stamp = call.stamp;
      if (keep && settings.tags && this.tagStamps) {
        // Versions of the policy's tags are those from the load's start; added tags', from now.
        stamp = { ...(await this.tagStamps.stamp(settings.tags, m)), ...call.stamp };
      }
      ttl =
        settings.ttl ??
        (policy.jitter ? jitterTtl(policy.ttl, policy.jitter.ratio, this.random) : policy.ttl);
      grace = settings.grace ?? policy.grace;
      envelope = envelopeOf(call, value, started, this.clock.now(), ttl, grace, stamp);
      if (keep) raw = encodeFor(this.codec, call, envelope);
    } catch (err) {
      // Nothing will be stored: the next caller must not wait for this lock.
      if (token) await this.store.unlock(key, token).catch(noop);
      throw err;
    }
    try {
      if (raw !== undefined) {
        this.held.hold(call, envelope, raw);
        this.schedule.stored(key, envelope.e);
        // The text encoded above is stored as it is when the store encodes with the same codec.
        const text = this.store.codec === this.codec ? raw : undefined;
        await this.store.fill(key, envelope, ttl + grace, token, text);
      } else if (token) {
        await this.store.unlock(key, token);
      }
      if (wasDown && (keep || token)) this.guard.answered();
    } catch (err) {
      // The value is still returned; the lock, if any, expires on its own.
      this.guard.failed(err, m, `the value ${call.e.label} loaded was returned but not cached`);
    }
  }

  /** Extends the lock every third of its TTL while the load runs. */
  private keepLocked(key: string, token: string, ttl: number): () => void {
    return every(this.clock, Math.max(1, Math.floor(ttl / 3)), () => {
      this.store.extendLock(key, token, ttl).catch(noop);
    });
  }
}
