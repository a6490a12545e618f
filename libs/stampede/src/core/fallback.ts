import { Call, encodeFor, envelopeOf, Outcome, storable } from './call';
import type { Clock } from './clock';
import type { EnvelopeCodec } from './envelope';
import type { HeldValues } from './held-values';
import type { KeyStates } from './key-state';
import { LoadContext, loadSettings } from './load-context';
import type { LoaderRun } from './loader-run';
import type { StoreGuard } from './store-guard';

/**
 * When the store does not answer. A value this process holds, within its TTL (or grace), is what
 * the store would have answered: serve it. Otherwise load, one load per key at a time here, and
 * keep the value, so that a stalled Redis does not turn into a backend stampede.
 */
export class Fallback {
  constructor(
    private readonly held: HeldValues,
    private readonly guard: StoreGuard,
    private readonly loader: LoaderRun,
    private readonly keys: KeyStates,
    private readonly codec: EnvelopeCodec,
    private readonly clock: Clock,
  ) {}

  async serve<T>(call: Call<T>, err: unknown): Promise<Outcome<T>> {
    const { key, policy, m, e } = call;
    const now = this.clock.now();
    const held = this.held.served(call, now);
    if (held) {
      const stale = held.e <= now;
      this.guard.failed(
        err,
        m,
        `${e.label} answered with a value held here${stale ? ' (stale, within grace)' : ''}, no load`,
      );
      return { value: held.v, hit: true, stale, fromL1: this.held.fromL1(policy) };
    }
    this.guard.failed(err, m, `${e.label} answered by its loader, one load per key at a time`);
    const { promise, joined } = this.keys.share(key, 'fallback', () => this.load(call));
    if (joined) m.joins++;
    return { value: (await promise) as T, hit: false, loaded: !joined, joined };
  }

  private async load<T>(call: Call<T>): Promise<T> {
    const started = this.clock.now();
    const controller = new AbortController();
    const context = new LoadContext(call.key, controller.signal);
    const value = await this.loader.bounded(
      this.loader.run(call.loader, call.e, controller, call.policy, context),
      call,
      controller,
    );
    this.keys.clearFailSafe(call.key);
    const settings = loadSettings(context, call.e.label);
    if (!settings.skip && storable(value, call.policy)) {
      const ttl = settings.ttl ?? call.policy.ttl;
      const grace = settings.grace ?? call.policy.grace;
      const envelope = envelopeOf(call, value, started, this.clock.now(), ttl, grace);
      this.held.keepLoaded(call, envelope, encodeFor(this.codec, call, envelope));
    }
    return value;
  }
}
