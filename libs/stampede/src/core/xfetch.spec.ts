import { shouldRecomputeEarly } from './xfetch';

describe('shouldRecomputeEarly (XFetch draw)', () => {
  const expiresAt = 10_000;
  const delta = 100;

  it('never recomputes long before expiry with a typical draw', () => {
    // random 0.5 -> -ln(0.5) = 0.69: recompute only within 69 ms of expiry (beta 1, delta 100)
    expect(shouldRecomputeEarly(expiresAt - 70, delta, 1, expiresAt, () => 0.5)).toBe(false);
    expect(shouldRecomputeEarly(expiresAt - 69, delta, 1, expiresAt, () => 0.5)).toBe(true);
  });

  it('always recomputes at or after expiry', () => {
    expect(shouldRecomputeEarly(expiresAt, delta, 1, expiresAt, () => 0)).toBe(true);
    expect(shouldRecomputeEarly(expiresAt + 1, delta, 1, expiresAt, () => 0.999999)).toBe(true);
  });

  it('a larger beta or delta recomputes earlier', () => {
    const at = expiresAt - 150;
    expect(shouldRecomputeEarly(at, delta, 1, expiresAt, () => 0.5)).toBe(false);
    expect(shouldRecomputeEarly(at, delta, 3, expiresAt, () => 0.5)).toBe(true);
    expect(shouldRecomputeEarly(at, delta * 3, 1, expiresAt, () => 0.5)).toBe(true);
  });

  it('the chance of an early recomputation at t before expiry is exp(-t / (delta * beta))', () => {
    // Deterministic sweep of the random source: the fraction of draws that fire.
    const n = 10_000;
    for (const t of [50, 100, 200]) {
      let fired = 0;
      for (let i = 0; i < n; i++) {
        const r = (i + 0.5) / n;
        if (shouldRecomputeEarly(expiresAt - t, delta, 1, expiresAt, () => r)) fired++;
      }
      expect(fired / n).toBeCloseTo(Math.exp(-t / delta), 2);
    }
  });
});
