import { Call, Loader, Outcome, traced } from './call';
import { Envelope, graceOf } from './envelope';
import type { FlowStages } from './flow-stages';
import type { MethodEntry } from './metrics-registry';
import type { StampedePolicy } from './policy';
import { StampCheck, withAllKeysTag } from './tag-versions';

/** The metrics name of getOrLoad calls without a name: never their key. */
export const UNNAMED_CALL = 'getOrLoad';

/**
 * The get-or-load flow of one key, read top to bottom in `run` and `resolve`: check the
 * in-process tier, join a call in flight, read the store, lock, re-check, run, fill, release.
 * Each stage is its own module (see FlowStages).
 */
export class GetOrLoad {
  constructor(private readonly s: FlowStages) {}

  /**
   * `name` groups the counters (`Class.method`, or a getOrLoad name); without one, `getOrLoad`
   * (never the key: one entry per key would grow without bound). A fresh value of the in-process
   * tier is answered in the caller's turn, with an already resolved promise.
   */
  run<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    name?: string,
    callTags = policy.tags,
  ): Promise<T> {
    // Every value is stamped with the prefix's version too, which clear() moves on.
    const tags = withAllKeysTag(callTags);
    const e = this.s.metrics.entry(name ?? UNNAMED_CALL);
    let held: Envelope<T> | undefined;
    try {
      held = this.heldFresh(key, loader, policy, e, tags);
    } catch (err) {
      return Promise.reject(err);
    }
    if (held) return Promise.resolve(held.v);
    return this.flow(key, loader, policy, e, tags);
  }

  /**
   * The check of getOrLoad, for callers that can answer in their own turn (the route
   * interceptor): the envelope of a fresh value of the in-process tier, counted as a call and a
   * hit (and refreshed early when XFetch says so, as on any hit), or undefined, counting nothing:
   * then call getOrLoad.
   */
  fresh<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    name?: string,
    callTags = policy.tags,
  ): Envelope<T> | undefined {
    const tags = withAllKeysTag(callTags);
    return this.heldFresh(key, loader, policy, this.s.metrics.entry(name ?? UNNAMED_CALL), tags);
  }

  private heldFresh<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    e: MethodEntry,
    tags: string[],
  ): Envelope<T> | undefined {
    // Check: a fresh value of the in-process tier costs no store command.
    const held = this.s.held.fresh<T>(key, policy, tags);
    if (!held) return undefined;
    const m = e.counts;
    m.calls++;
    m.hits++;
    m.l1Hits++;
    this.s.keys.clearFailSafe(key);
    if (this.s.telemetry.traceL1Hits) e.telemetry.start(key)?.end('l1', false, false, false);
    if (policy.xfetch) {
      const stamp = this.s.tags.stamp(tags);
      this.s.refresher.maybeEarly({ key, loader, policy, m, e, stamp }, held);
    }
    return held;
  }

  /** The rest of getOrLoad after the in-process tier: join a call in flight, or lead one. */
  private async flow<T>(
    key: string,
    loader: Loader<T>,
    policy: StampedePolicy,
    e: MethodEntry,
    tags: string[],
  ): Promise<T> {
    const m = e.counts;
    m.calls++;
    // Join: concurrent callers of one key in this process share one flow.
    let outcome: Outcome<T>;
    const running = policy.singleFlight ? this.s.keys.callOf(key) : undefined;
    if (running) {
      m.joins++;
      outcome = (await running) as Outcome<T>;
    } else {
      outcome = await this.lead({ key, loader, policy, m, e, shared: policy.singleFlight }, tags);
    }
    if (policy.cache) {
      if (outcome.hit) {
        m.hits++;
        if (outcome.fromL1) m.l1Hits++;
        if (outcome.stale || this.s.keys.isRefreshing(key)) m.staleServes++;
      } else {
        m.misses++;
      }
    }
    return outcome.value;
  }

  /**
   * Starts the flow of a call that joins none. It is traced (the callers that join it reach
   * neither the store nor the loader) and, when shared, the callers of its key join it.
   */
  private lead<T>(call: Call<T>, tags: string[]): Promise<Outcome<T>> {
    const span = call.e.telemetry.start(call.key);
    const flow = span ? traced(span, () => this.resolve(call, tags)) : this.resolve(call, tags);
    if (call.shared) this.s.keys.setCall(call.key, flow, call);
    return flow;
  }

  /**
   * The get-or-load handler: read the store; a fresh value is a hit, a stale one within grace is
   * served while one refresh runs, a refresh in flight here is joined; otherwise the lock path
   * (lock, re-check, run, fill, release), or without a lock, run and fill.
   */
  private async resolve<T>(call: Call<T>, tags: string[]): Promise<Outcome<T>> {
    const { key, policy } = call;
    try {
      if (!policy.cache)
        return { value: await this.s.loader.uncached(call), hit: false, loaded: true };
      call.stamp = this.s.tagStamps.known(tags) ?? (await this.s.tagStamps.stamp(tags, call.m));
      let envelope;
      const wasDown = this.s.guard.down;
      try {
        // The lock path's callers share one read, unless single-flight already made them one.
        envelope =
          policy.lock && !policy.singleFlight
            ? await this.s.lockPath.read<T>(key)
            : await this.s.store.get<T>(key);
      } catch (err) {
        return await this.s.fallback.serve(call, err);
      }
      if (wasDown) this.s.guard.answered();
      let check: StampCheck = 'current';
      if (envelope !== undefined) {
        check = this.s.held.check(envelope, policy.grace);
        if (check === 'invalid') {
          await this.s.held.drop(key); // invalidated through one of its tags: a miss
          envelope = undefined;
        }
      }
      if (envelope !== undefined) {
        this.s.held.hold(call, envelope);
        const now = this.s.clock.now();
        // A value invalidated softly (its tags) is stale as one past its TTL.
        if (envelope.e > now && check === 'current') {
          this.s.keys.clearFailSafe(key); // refreshed, here or elsewhere
          this.s.refresher.maybeEarly(call, envelope);
          return { value: envelope.v, hit: true };
        }
        if (now < envelope.e + graceOf(envelope, policy.grace))
          return await this.s.refresher.serveStale(call, envelope);
        // Past grace on this clock (the store's clock ran later): a miss.
      }
      const refresh = this.s.keys.get(key)?.refreshLoad as Promise<T> | undefined;
      if (refresh) {
        try {
          return { value: await refresh, hit: false };
        } catch {
          // the refresh failed: load as on any miss
        }
      }
      if (policy.lock) {
        const { value, waited, loaded, joined } = await this.s.lockPath.load(call);
        return { value, hit: false, waited, loaded, joined };
      }
      return { value: await this.s.fill.run(call), hit: false, loaded: true };
    } finally {
      if (call.shared) this.s.keys.endCall(key, call);
    }
  }
}
