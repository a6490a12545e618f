import { jitterTtl } from './jitter';

describe('jitterTtl', () => {
  it('stays within ttl * (1 +- ratio), in whole milliseconds', () => {
    for (let i = 0; i <= 1000; i++) {
      const r = i / 1001;
      const ttl = jitterTtl(1000, 0.1, () => r);
      expect(Number.isInteger(ttl)).toBe(true);
      expect(ttl).toBeGreaterThanOrEqual(900);
      expect(ttl).toBeLessThanOrEqual(1100);
    }
  });

  it('reaches both ends and is uniform over them', () => {
    expect(jitterTtl(1000, 0.1, () => 0)).toBe(900);
    expect(jitterTtl(1000, 0.1, () => 0.9999999)).toBe(1100);
    const counts = new Map<number, number>();
    const n = 201 * 50;
    for (let i = 0; i < n; i++) {
      const ttl = jitterTtl(1000, 0.1, () => (i + 0.5) / n);
      counts.set(ttl, (counts.get(ttl) ?? 0) + 1);
    }
    expect(counts.size).toBe(201); // every value 900..1100
    for (const c of counts.values()) expect(c).toBe(50);
  });

  it('ratio 0 keeps the TTL; tiny TTLs never reach 0', () => {
    expect(jitterTtl(1000, 0, () => 0.7)).toBe(1000);
    expect(jitterTtl(1, 0.9, () => 0)).toBe(1);
  });
});
