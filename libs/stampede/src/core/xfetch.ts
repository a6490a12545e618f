import { LruCache } from '@nest-redis-resilience/common';
import type { RandomSource } from './clock';

/**
 * XFetch (Vattani, Chierichetti, Lowenstein, VLDB 2015): recompute early when
 * `now - delta * beta * ln(random()) >= expiresAt`. `delta` is how long the last load took;
 * a larger beta recomputes earlier. The chance grows as expiry nears, so under steady traffic
 * one caller refreshes the value shortly before it expires.
 */
export function shouldRecomputeEarly(
  now: number,
  deltaMs: number,
  beta: number,
  expiresAt: number,
  random: RandomSource,
): boolean {
  const r = random() || Number.MIN_VALUE; // random() may return 0; ln(0) would be -Infinity
  return now - deltaMs * beta * Math.log(r) >= expiresAt;
}

/** The XFetch draws per `delta * beta` that one scheduled recomputation stands for. */
export const DRAWS_PER_DELTA = 10;

/**
 * How long before expiry to recompute one stored value: the lead of the first of XFetch draws
 * made `draws` times per `delta * beta` ms, sampled once. P(lead < x) =
 * exp(-draws * exp(-x / (delta * beta))), a Gumbel law with mean delta * beta * (ln draws + 0.577),
 * about 2.9 * delta * beta. Sampling once per value, instead of drawing on each read, makes the
 * moment independent of how many reads there are: coalesced reads on a busy machine are few,
 * and per-read draws then fire too late (and heavy traffic would fire them far too early).
 * With beta 1, exp(-10 / e) = 2.5 % of values get a lead shorter than one load time.
 */
export function earlyRecomputeLead(
  deltaMs: number,
  beta: number,
  random: RandomSource,
  draws = DRAWS_PER_DELTA,
): number {
  const u = random() || Number.MIN_VALUE;
  return deltaMs * beta * (Math.log(draws) - Math.log(-Math.log(u)));
}

/**
 * When this process recomputes each key early: one sampled moment per stored value (per expiry),
 * at most `maxKeys` keys remembered.
 */
export class EarlyRecomputeSchedule {
  /** Past `maxKeys`, the least recently used key's plan is forgotten (a new moment is drawn). */
  private readonly plans: LruCache<{ e: number; at: number }>;

  constructor(
    private readonly random: RandomSource,
    maxKeys = 10_000,
  ) {
    this.plans = new LruCache({ maxSize: maxKeys, ttlMs: Infinity });
  }

  /**
   * The time at which `envelope` is due for recomputation, at most `maxLead` before its expiry.
   * Infinity for an envelope older than
   * one this process has stored or seen: it was read before a refresh landed, and recomputing
   * it would refresh the key twice for one expiry.
   */
  due(key: string, envelope: { d: number; e: number }, beta: number, maxLead = Infinity): number {
    const plan = this.plans.get(key);
    if (plan && plan.e > envelope.e) return Infinity;
    if (plan && plan.e === envelope.e && !Number.isNaN(plan.at)) return plan.at;
    const lead = Math.min(earlyRecomputeLead(envelope.d, beta, this.random), maxLead);
    const at = envelope.e - lead;
    this.remember(key, envelope.e, at);
    return at;
  }

  /** A value expiring at `e` was stored here. */
  stored(key: string, e: number): void {
    const plan = this.plans.get(key);
    if (!plan || plan.e < e) this.remember(key, e, NaN);
  }

  forget(key: string): void {
    this.plans.delete(key);
  }

  private remember(key: string, e: number, at: number): void {
    this.plans.set(key, { e, at });
  }
}
