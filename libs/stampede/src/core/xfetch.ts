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
