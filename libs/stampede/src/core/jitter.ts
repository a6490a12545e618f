import type { RandomSource } from './clock';

/**
 * A TTL drawn uniformly from [ttl * (1 - ratio), ttl * (1 + ratio)], in whole milliseconds
 * and never below 1 ms, so that keys written together do not expire together.
 */
export function jitterTtl(ttlMs: number, ratio: number, random: RandomSource): number {
  if (ratio <= 0) return ttlMs;
  const low = Math.ceil(ttlMs * (1 - ratio));
  const high = Math.floor(ttlMs * (1 + ratio));
  return Math.max(1, low + Math.floor(random() * (high - low + 1)));
}
