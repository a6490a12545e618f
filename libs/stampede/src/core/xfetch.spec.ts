import { earlyRecomputeLead, EarlyRecomputeSchedule, shouldRecomputeEarly } from './xfetch';

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

describe('earlyRecomputeLead (one sampled moment per stored value)', () => {
  it('is the first of 10 draws per delta * beta: P(lead < x) = exp(-10 * exp(-x / (delta * beta)))', () => {
    const n = 10_000;
    for (const [delta, beta] of [
      [100, 1],
      [50, 2],
    ]) {
      const leads = Array.from({ length: n }, (_, i) =>
        earlyRecomputeLead(delta, beta, () => (i + 0.5) / n),
      );
      for (const x of [100, 200, 300, 500]) {
        const below = leads.filter((lead) => lead < x).length / n;
        expect(below).toBeCloseTo(Math.exp(-10 * Math.exp(-x / (delta * beta))), 2);
      }
    }
  });

  it('grows with delta and beta, and a random of 0 never recomputes before expiry', () => {
    expect(earlyRecomputeLead(200, 1, () => 0.5)).toBeCloseTo(
      2 * earlyRecomputeLead(100, 1, () => 0.5),
    );
    expect(earlyRecomputeLead(100, 2, () => 0.5)).toBeCloseTo(
      2 * earlyRecomputeLead(100, 1, () => 0.5),
    );
    expect(earlyRecomputeLead(100, 1, () => 0)).toBeLessThan(0);
  });
});

describe('EarlyRecomputeSchedule', () => {
  it('samples once per stored value, and never recomputes a value older than one stored here', () => {
    let r = 0.5;
    const schedule = new EarlyRecomputeSchedule(() => r);
    const first = { d: 100, e: 10_000 };
    const due = schedule.due('k', first, 1);
    expect(due).toBeCloseTo(10_000 - earlyRecomputeLead(100, 1, () => 0.5));
    r = 0.01;
    expect(schedule.due('k', first, 1)).toBe(due); // same value: same moment
    schedule.stored('k', 11_000);
    expect(schedule.due('k', first, 1)).toBe(Infinity); // read before the refresh landed
    // A lead longer than `maxLead` (here: a load time inflated by a stall) is cut to it.
    expect(new EarlyRecomputeSchedule(() => 0.999).due('x', { d: 5000, e: 20_000 }, 1, 500)).toBe(
      19_500,
    );
    const next = { d: 100, e: 11_000 };
    expect(schedule.due('k', next, 1)).toBeCloseTo(11_000 - earlyRecomputeLead(100, 1, () => 0.01));
  });
});
