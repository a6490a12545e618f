import type { Call, LockOutcome, Outcome } from './call';
import { Envelope, graceOf } from './envelope';
import { StampedeConfigError, StampedeKeyError } from './errors';
import type { FlowStages } from './flow-stages';
import { lockToken } from './lock-token';
import type { MethodEntry } from './metrics-registry';
import { BatchLoader, MissingBatch } from './missing-batch';
import type { StampedePolicy } from './policy';
import { StampCheck, withAllKeysTag } from './tag-versions';

/** The metrics name of getOrLoadMany calls without a name. */
export const UNNAMED_BATCH = 'getOrLoadMany';

/** The engine's stages the batch flow is built from (see flow-stages.ts). */
export type BatchStages = FlowStages;

type Settle<T> = (outcome: Promise<Outcome<T>>) => void;

/**
 * The get-or-load flow of many keys at once, from the same stages as getOrLoad's, per key: the
 * in-process tier; a call of the key in flight here is joined; one read of the rest (MGET); then
 * for the misses, per-key locks (one attempt each, sent together) and one loader call for the
 * keys this caller won, each filled (and its lock released) through the usual fill path. The
 * keys another instance holds the lock of are waited for through the usual wait and notify path.
 *
 * Each key is a Call of its own, whose loader asks a MissingBatch for it: the keys whose loads
 * start together share one loader call. Counters count keys, not batches.
 */
export class GetOrLoadMany {
  constructor(private readonly s: BatchStages) {}

  async run<T>(
    keys: readonly string[],
    loadMissing: BatchLoader<T>,
    policy: StampedePolicy,
    name?: string,
    callTags = policy.tags,
  ): Promise<(T | undefined)[]> {
    // Every value is stamped with the prefix's version too, which clear() moves on.
    const tags = withAllKeysTag(callTags);
    const where = name ?? 'StampedeService.getOrLoadMany';
    checkBatch(keys, loadMissing, where);
    const unique = [...new Set(keys)];
    if (unique.length === 0) return [];
    const e = this.s.metrics.entry(name ?? UNNAMED_BATCH);
    const batch = new MissingBatch(loadMissing, where);
    const outcomes = new Map<string, Promise<Outcome<T | undefined>>>();
    const led: Call<T | undefined>[] = [];
    for (const key of unique) {
      e.counts.calls++;
      const call: Call<T | undefined> = {
        key,
        loader: batch.loaderOf(key),
        policy,
        m: e.counts,
        e,
        shared: policy.singleFlight,
      };
      const held = this.s.held.fresh<T>(key, policy, tags);
      if (held) {
        this.s.keys.clearFailSafe(key);
        if (policy.xfetch) {
          call.stamp = this.s.tags.stamp(tags);
          this.s.refresher.maybeEarly(call, held);
        }
        outcomes.set(key, Promise.resolve({ value: held.v, hit: true, fromL1: true }));
        continue;
      }
      const running = policy.singleFlight ? this.s.keys.callOf(key) : undefined;
      if (running) {
        e.counts.joins++;
        outcomes.set(key, running as Promise<Outcome<T | undefined>>);
        continue;
      }
      led.push(call);
    }
    if (led.length > 0) {
      const flows = this.lead(led, tags);
      led.forEach((call, i) => outcomes.set(call.key, flows[i]));
    }
    const settled = await Promise.allSettled(unique.map((key) => outcomes.get(key)!));
    const values = new Map<string, T | undefined>();
    let failure: PromiseRejectedResult | undefined;
    settled.forEach((result, i) => {
      if (result.status === 'rejected') {
        failure ??= result;
        return;
      }
      this.count(e, unique[i], result.value, policy);
      values.set(unique[i], result.value.value);
    });
    if (failure) throw failure.reason;
    return keys.map((key) => values.get(key));
  }

  /**
   * Starts the flows of the keys this call leads: callers of those keys in this process join them
   * (single-flight) until they settle.
   */
  private lead<T>(calls: Call<T>[], tags: string[]): Promise<Outcome<T>>[] {
    const slots = calls.map((call) => {
      let resolve!: (o: Outcome<T>) => void;
      let reject!: (err: unknown) => void;
      const promise = new Promise<Outcome<T>>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      if (call.shared) this.s.keys.setCall(call.key, promise, call);
      let settled = false;
      const settle: Settle<T> = (outcome) => {
        if (settled) return;
        settled = true;
        const end = () => {
          if (call.shared) this.s.keys.endCall(call.key, call);
        };
        outcome.then(
          (o) => {
            end();
            resolve(o);
          },
          (err: unknown) => {
            end();
            reject(err);
          },
        );
      };
      return { promise, settle };
    });
    const settles = slots.map((slot) => slot.settle);
    this.resolve(calls, settles, tags).catch((err: unknown) => {
      for (const settle of settles) settle(Promise.reject(err));
    });
    return slots.map((slot) => slot.promise);
  }

  /** Read, then per key: a hit, a stale value within grace, a refresh to join, or a miss. */
  private async resolve<T>(calls: Call<T>[], settles: Settle<T>[], tags: string[]): Promise<void> {
    const { policy, m } = calls[0];
    if (!policy.cache) {
      calls.forEach((call, i) => settles[i](this.loaded(this.s.loader.uncached(call))));
      return;
    }
    const stamp = this.s.tagStamps.known(tags) ?? (await this.s.tagStamps.stamp(tags, m));
    for (const call of calls) call.stamp = stamp;
    let envelopes: (Envelope<T> | undefined)[];
    const wasDown = this.s.guard.down;
    try {
      envelopes = await this.readMany<T>(calls.map((call) => call.key));
    } catch (err) {
      calls.forEach((call, i) => settles[i](this.s.fallback.serve(call, err)));
      return;
    }
    if (wasDown) this.s.guard.answered();
    // A value invalidated through one of its tags is a miss: drop it, as getOrLoad does; one
    // invalidated softly is stale, as one past its TTL.
    const checks: StampCheck[] = envelopes.map((envelope) =>
      envelope === undefined ? 'current' : this.s.held.check(envelope, policy.grace),
    );
    await Promise.all(
      envelopes.map((envelope, i) => {
        if (envelope === undefined || checks[i] !== 'invalid') return undefined;
        envelopes[i] = undefined;
        return this.s.held.drop(calls[i].key);
      }),
    );
    const now = this.s.clock.now();
    const misses: number[] = [];
    calls.forEach((call, i) => {
      const envelope = envelopes[i];
      if (envelope !== undefined) {
        this.s.held.hold(call, envelope);
        if (envelope.e > now && checks[i] === 'current') {
          this.s.keys.clearFailSafe(call.key);
          this.s.refresher.maybeEarly(call, envelope);
          settles[i](Promise.resolve({ value: envelope.v, hit: true }));
          return;
        }
        if (now < envelope.e + graceOf(envelope, policy.grace)) {
          settles[i](this.s.refresher.serveStale(call, envelope));
          return;
        }
      }
      const refresh = this.s.keys.get(call.key)?.refreshLoad as Promise<T> | undefined;
      if (refresh) {
        settles[i](
          refresh.then(
            (value) => ({ value, hit: false }),
            () => this.loadOne(call), // the refresh failed: load as on any miss
          ),
        );
        return;
      }
      misses.push(i);
    });
    if (misses.length === 0) return;
    if (!policy.lock) {
      // One synchronous loop: the loads of all misses share one loader call.
      for (const i of misses) settles[i](this.loaded(this.s.fill.run(calls[i])));
      return;
    }
    await this.lockMany(
      misses.map((i) => calls[i]),
      misses.map((i) => settles[i]),
    );
  }

  /**
   * Per-key locks: a key whose lock path already runs here is joined; the others make one
   * attempt each, sent together. The keys won are loaded by one loader call and filled (which
   * releases their locks); the others wait for their holders as getOrLoad's callers do.
   */
  private async lockMany<T>(calls: Call<T>[], settles: Settle<T>[]): Promise<void> {
    const mine: { call: Call<T>; settle: (o: Promise<LockOutcome<T>>) => void; i: number }[] = [];
    calls.forEach((call, i) => {
      let settle!: (o: Promise<LockOutcome<T>>) => void;
      const slot = new Promise<LockOutcome<T>>((resolve, reject) => {
        settle = (o) => o.then(resolve, reject);
      });
      const run = this.s.keys.share(call.key, 'lock', () => slot);
      const outcome = run.promise as Promise<LockOutcome<T>>;
      if (run.joined) call.m.joins++;
      else mine.push({ call, settle, i });
      settles[i](
        outcome.then((o) => ({
          value: o.value,
          hit: false,
          waited: o.waited,
          loaded: o.loaded && !run.joined,
          joined: run.joined,
        })),
      );
    });
    const lock = calls[0].policy.lock!;
    const tokens = mine.map(() => lockToken());
    const wasDown = this.s.guard.down;
    const steps = await Promise.all(
      mine.map(({ call }, j) =>
        this.s.store.readOrLock<T>(call.key, tokens[j], lock.ttl).catch((err: unknown) => ({
          kind: 'error' as const,
          err,
        })),
      ),
    );
    if (wasDown && steps.some((step) => step.kind !== 'error')) this.s.guard.answered();
    // One synchronous loop: the loads of the keys won share one loader call.
    mine.forEach(({ call, settle }, j) => {
      const step = steps[j];
      if (step.kind === 'locked') {
        settle(
          this.s.fill
            .run(call, step.token ?? tokens[j])
            .then((value) => ({ value, waited: false, loaded: true })),
        );
      } else if (step.kind === 'hit') {
        settle(this.usableOrWait(call, step.envelope));
      } else if (step.kind === 'busy') {
        settle(this.s.lockPath.waitAndLoad(call));
      } else {
        settle(
          this.s.fallback
            .serve(call, step.err)
            .then((o) => ({ value: o.value, waited: false, loaded: o.loaded === true })),
        );
      }
    });
  }

  private async usableOrWait<T>(call: Call<T>, envelope: Envelope<T>): Promise<LockOutcome<T>> {
    const usable = await this.s.held.usable(call.key, envelope, call.policy.grace);
    if (!usable) return this.s.lockPath.waitAndLoad(call);
    this.s.held.hold(call, usable);
    return { value: usable.v, waited: false, loaded: false };
  }

  /** One key, as getOrLoad loads it on a miss (after a failed refresh). */
  private async loadOne<T>(call: Call<T>): Promise<Outcome<T>> {
    if (!call.policy.lock) return this.loaded(this.s.fill.run(call));
    const { value, waited, loaded, joined } = await this.s.lockPath.load(call);
    return { value, hit: false, waited, loaded, joined };
  }

  private loaded<T>(value: Promise<T>): Promise<Outcome<T>> {
    return value.then((v) => ({ value: v, hit: false, loaded: true }));
  }

  /** One MGET (per slot on a Cluster) where the store has it; otherwise reads sent together. */
  private readMany<T>(keys: string[]): Promise<(Envelope<T> | undefined)[]> {
    const { store } = this.s;
    if (store.getMany) return store.getMany<T>(keys);
    return Promise.all(keys.map((key) => store.get<T>(key)));
  }

  private count(
    e: MethodEntry,
    key: string,
    outcome: Outcome<unknown>,
    policy: StampedePolicy,
  ): void {
    if (!policy.cache) return;
    const m = e.counts;
    if (outcome.hit) {
      m.hits++;
      if (outcome.fromL1) m.l1Hits++;
      if (outcome.stale || this.s.keys.isRefreshing(key)) m.staleServes++;
    } else {
      m.misses++;
    }
  }
}

function checkBatch(keys: unknown, loadMissing: unknown, where: string): void {
  if (!Array.isArray(keys) || keys.some((key) => typeof key !== 'string')) {
    throw new StampedeKeyError(`${where}: keys must be an array of strings`);
  }
  if (typeof loadMissing !== 'function') {
    throw new StampedeConfigError(
      `${where}: loadMissing must be a function of the missing keys, returning a Record or a Map`,
    );
  }
}
