import type { Call } from './call';
import type { Clock } from './clock';
import { encodedSize, Envelope, EnvelopeCodec, graceOf } from './envelope';
import type { InvalidationBusWatch } from './invalidation-bus';
import { L1Cache, L1Limits } from './l1-cache';
import { LastKnownValues } from './last-known';
import type { StampedePolicy } from './policy';
import type { ValueStore } from './store';
import type { StampCheck, TagVersions } from './tag-versions';

/**
 * The values this process holds: the in-process tier (L1), which serves hits, and, without L1,
 * the last known values of a distributed store, served only while the store fails. Both drop a
 * value invalidated through one of its tags.
 */
export class HeldValues {
  readonly l1?: L1Cache;
  private readonly lastKnown: LastKnownValues;

  constructor(
    private readonly store: Pick<ValueStore, 'distributed' | 'delete'>,
    private readonly codec: EnvelopeCodec,
    private readonly clock: Clock,
    private readonly tags: TagVersions,
    private readonly bus: InvalidationBusWatch,
    l1: L1Limits | undefined,
    lastKnown: { maxEntries?: number; maxBytes?: number } = {},
  ) {
    if (l1) this.l1 = new L1Cache(codec, l1);
    this.lastKnown = new LastKnownValues(lastKnown.maxEntries, lastKnown.maxBytes);
  }

  /** A fresh value of the in-process tier, when its tags' versions are known here. */
  fresh<T>(
    key: string,
    policy: StampedePolicy,
    tags: string[] | undefined,
  ): Envelope<T> | undefined {
    if (!this.l1 || !policy.cache || !policy.l1) return undefined;
    const now = this.clock.now();
    // While invalidations are missed, an entry or a tag version not verified lately is read from
    // the store again.
    const verifiedAfter = this.bus.verifiedAfter(now);
    if (tags !== undefined && this.tags.anyMissing(tags, verifiedAfter)) return undefined;
    const envelope = this.l1.get<T>(key, now, verifiedAfter);
    if (!envelope || envelope.e <= now) return undefined;
    const check = this.tags.check(envelope.t);
    if (check === 'invalid') this.l1.delete(key);
    // A value invalidated softly is read from the store: served stale there, while it refreshes.
    return check === 'current' ? envelope : undefined;
  }

  /**
   * Keeps a value stored or read just now: in L1, or (for a distributed store) among the last
   * known values. `raw` is its encoded text, when at hand.
   */
  hold(call: Call<unknown>, envelope: Envelope<unknown>, raw?: string): void {
    if (this.l1 && call.policy.l1) {
      const keepUntil = envelope.e + graceOf(envelope, call.policy.grace);
      this.l1.set(call.key, envelope, keepUntil, this.clock.now());
    } else if (this.store.distributed) {
      const size = raw?.length ?? encodedSize(envelope) ?? this.codec.encode(envelope).length;
      this.lastKnown.remember(call.key, envelope, size);
    }
  }

  /** Keeps a value loaded while the store was unreachable, whatever the store. */
  keepLoaded(call: Call<unknown>, envelope: Envelope<unknown>, raw: string): void {
    const { key, policy } = call;
    if (this.l1 && policy.l1)
      this.l1.set(key, envelope, envelope.e + graceOf(envelope, policy.grace), this.clock.now());
    else this.lastKnown.remember(key, envelope, raw.length);
  }

  /** A value held here that may be served at `now` without the store (stale ones within grace). */
  served<T>(call: Call<T>, now: number): Envelope<T> | undefined {
    const envelope =
      this.l1 && call.policy.l1
        ? this.l1.get<T>(call.key, now)
        : this.lastKnown.fresh<T>(call.key, now, call.policy.grace);
    return envelope && this.tags.valid(envelope.t) ? envelope : undefined;
  }

  /** Whether `served` values of this call come from L1. */
  fromL1(policy: StampedePolicy): boolean {
    return this.l1 !== undefined && policy.l1;
  }

  /**
   * Whether a value's tags moved on since it was stored: `invalid` (hard), `stale` (softly; a
   * value without grace then counts as invalid), or `current`.
   */
  check(envelope: Envelope<unknown>, policyGrace: number): StampCheck {
    const check = this.tags.check(envelope.t);
    return check === 'stale' && graceOf(envelope, policyGrace) === 0 ? 'invalid' : check;
  }

  /** Drops a value invalidated through one of its tags, here and in the store. */
  async drop(key: string): Promise<void> {
    this.l1?.delete(key);
    await this.store.delete(key).catch(() => undefined);
  }

  /**
   * A value invalidated through one of its tags (hard, or softly without grace) is a miss: drop
   * it, here and in the store.
   */
  async usable<T>(
    key: string,
    envelope: Envelope<T> | undefined,
    policyGrace: number,
  ): Promise<Envelope<T> | undefined> {
    if (!envelope || this.check(envelope, policyGrace) !== 'invalid') return envelope;
    this.l1?.delete(key);
    await this.store.delete(key).catch(() => undefined);
    return undefined;
  }

  forget(key: string): void {
    this.lastKnown.forget(key);
    this.l1?.delete(key);
  }

  l1Stats(): { entries: number; bytes: number } | undefined {
    return this.l1?.stats;
  }

  lastKnownStats(): { entries: number; bytes: number } {
    return this.lastKnown.stats;
  }
}
