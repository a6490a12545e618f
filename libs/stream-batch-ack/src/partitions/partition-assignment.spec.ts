import { assignedPartitions } from './partition-assignment';

describe('assignedPartitions', () => {
  const spread = (members: string[], n: number) =>
    members.map((m) => assignedPartitions(members, m, n));

  it('gives every partition to exactly one member, N / M each (rounded up or down)', () => {
    for (const m of [1, 2, 3, 4, 7])
      for (const n of [1, 2, 6, 10, 16]) {
        const members = Array.from({ length: m }, (_, i) => `consumer-${i}`);
        const parts = spread(members, n);
        expect(parts.flat().sort((a, b) => a - b)).toEqual(Array.from({ length: n }, (_, i) => i));
        for (const p of parts) {
          expect(p.length).toBeGreaterThanOrEqual(Math.floor(n / m));
          expect(p.length).toBeLessThanOrEqual(Math.ceil(n / m));
        }
      }
  });

  it('is the same whatever order the members are listed in (every consumer computes it alone)', () => {
    expect(assignedPartitions(['b', 'c', 'a'], 'b', 6)).toEqual(
      assignedPartitions(['a', 'b', 'c'], 'b', 6),
    );
    expect(assignedPartitions(['a', 'b', 'a'], 'b', 4)).toEqual([1, 3]);
  });

  it('a consumer that is not a member gets nothing', () => {
    expect(assignedPartitions(['a', 'b'], 'c', 6)).toEqual([]);
  });
});
