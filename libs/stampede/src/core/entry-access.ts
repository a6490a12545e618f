import type { Call } from './call';
import type { Clock, RandomSource } from './clock';
import type { Envelope, EnvelopeCodec } from './envelope';
import { StampedeSerializationError } from './errors';
import type { HeldValues } from './held-values';
import { jitterTtl } from './jitter';
import type { MethodEntry } from './metrics-registry';
import { resolvePolicy, StampedePolicy } from './policy';
import type { StampedeStore } from './store';
import type { StoreGuard } from './store-guard';
import type { TagStamps } from './tag-stamps';
import { withAllKeysTag } from './tag-versions';

/** What `set` stores a value with, validated (ms). */
export interface EntryOptions {
  ttl: number;
  /** 0: none. */
  grace: number;
  tags?: string[];
  /** Spread the TTL over ttl * (1 +- ratio). */
  jitter?: number;
  /** Keep the value in this process's L1 (when the module has one). */
  l1: boolean;
}

/** How `get` reads: no loader, no grace of its own (a value's own grace still keeps it in L1). */
const READ_POLICY: StampedePolicy = resolvePolicy({ ttl: 1 }, 1, 'StampedeService.get');

/**
 * Reading and writing one key without a loader (`get`, `set`), through the same tiers as the
 * get-or-load flow: L1 first, then the store; a value written here is kept in this process's L1
 * and dropped from the others'. Values are stamped and checked against tag versions as loaded
 * ones are, so `invalidateTags` and `clear` reach them.
 */
export class EntryAccess {
  constructor(
    private readonly store: StampedeStore,
    private readonly held: HeldValues,
    private readonly tagStamps: TagStamps,
    private readonly guard: StoreGuard,
    private readonly codec: EnvelopeCodec,
    private readonly clock: Clock,
    private readonly random: RandomSource,
  ) {}

  /**
   * The fresh value of `key`, or undefined (missing, expired, stale or invalidated). When the
   * store fails, a fresh value held here, else undefined.
   */
  async get<T>(key: string, e: MethodEntry): Promise<T | undefined> {
    const m = e.counts;
    m.calls++;
    const call = { key, policy: READ_POLICY, m, e } as Call<T>;
    const inL1 = this.held.fresh<T>(key, READ_POLICY, withAllKeysTag(undefined));
    if (inL1) {
      m.hits++;
      m.l1Hits++;
      return inL1.v;
    }
    let envelope: Envelope<T> | undefined;
    const wasDown = this.guard.down;
    try {
      envelope = await this.store.get<T>(key);
    } catch (err) {
      this.guard.failed(err, m, 'StampedeService.get answered with a value held here, or a miss');
      const held = this.held.served(call, this.clock.now());
      return this.counted(m, held && held.e > this.clock.now() ? held : undefined);
    }
    if (wasDown) this.guard.answered();
    if (envelope === undefined) return this.counted(m, undefined);
    // Judged against the versions of its tags, which this process may not know yet.
    await this.tagStamps.stamp(withAllKeysTag(Object.keys(envelope.t ?? {})), m);
    const check = this.held.check(envelope, 0);
    if (check === 'invalid') {
      await this.held.drop(key);
      return this.counted(m, undefined);
    }
    this.held.hold(call, envelope);
    const fresh = check === 'current' && envelope.e > this.clock.now();
    return this.counted(m, fresh ? envelope : undefined);
  }

  /**
   * Stores `value` as a load would (same envelope, so getOrLoad and the decorators see it), then
   * keeps it in this process's L1; the other instances drop theirs (one step with Redis).
   * Rejects when the store does not confirm it, or the serializer cannot write the value.
   */
  async set<T>(key: string, value: T, options: EntryOptions, e: MethodEntry): Promise<void> {
    // Versions read from the store: a clear() or invalidateTags() that another instance has just
    // done (its broadcast still on the way) must not drop this value.
    const stamp = await this.tagStamps.stamp(withAllKeysTag(options.tags), e.counts, true);
    const ttl = options.jitter ? jitterTtl(options.ttl, options.jitter, this.random) : options.ttl;
    const envelope: Envelope<T> = { v: value, d: 0, e: this.clock.now() + ttl, t: stamp };
    if (options.grace > 0) envelope.g = options.grace;
    let raw: string;
    try {
      raw = this.codec.encode(envelope);
    } catch (err) {
      throw new StampedeSerializationError(e.label, key, err);
    }
    const text = this.store.codec === this.codec ? raw : undefined;
    const keepMs = ttl + options.grace;
    if (this.store.replace) {
      await this.store.replace(key, envelope, keepMs, text);
    } else {
      await this.store.fill(key, envelope, keepMs, undefined, text);
      await this.store.broadcast?.({ keys: [key] });
    }
    const policy = { ...READ_POLICY, l1: options.l1 };
    this.held.hold({ key, policy, m: e.counts, e } as Call<T>, envelope, raw);
  }

  private counted<T>(m: MethodEntry['counts'], envelope: Envelope<T> | undefined): T | undefined {
    if (envelope) m.hits++;
    else m.misses++;
    return envelope?.v;
  }
}
