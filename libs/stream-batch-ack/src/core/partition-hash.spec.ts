import { fnv1a32, partitionOf } from './partition-hash';

describe('fnv1a32 (the partition hash)', () => {
  it('matches the published FNV-1a 32-bit test vectors', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('hashes the UTF-8 bytes (non-ASCII keys are stable too)', () => {
    expect(fnv1a32('é')).toBe(fnv1a32(Buffer.from([0xc3, 0xa9]).toString('utf8')));
    expect(fnv1a32('삼성전자')).toBe(fnv1a32('삼성전자'));
    expect(fnv1a32('삼성전자')).not.toBe(fnv1a32('삼성전자 '));
  });
});

describe('partitionOf', () => {
  it('is in range, deterministic, and the same key always gets the same partition', () => {
    for (const n of [1, 2, 3, 7, 16, 1024])
      for (let k = 0; k < 200; k++) {
        const p = partitionOf(`SYM${k}`, n);
        expect(Number.isInteger(p) && p >= 0 && p < n).toBe(true);
        expect(partitionOf(`SYM${k}`, n)).toBe(p);
      }
    expect(partitionOf('anything', 1)).toBe(0);
  });

  it('spreads 100 ticker-like symbols over 4 partitions without leaving one empty or overloaded', () => {
    const counts = [0, 0, 0, 0];
    for (let k = 0; k < 100; k++) counts[partitionOf(`SYM${String(k).padStart(3, '0')}`, 4)]++;
    for (const c of counts) expect(c).toBeGreaterThanOrEqual(10);
    for (const c of counts) expect(c).toBeLessThanOrEqual(40);
  });

  it('reference values (a producer in another language must reproduce these)', () => {
    expect(fnv1a32('BTC')).toBe(2492351168);
    expect(fnv1a32('SYM001')).toBe(2503409519);
    expect(fnv1a32('삼성전자')).toBe(278463798);
    expect([partitionOf('BTC', 4), partitionOf('ETH', 6), partitionOf('SYM001', 6)]).toEqual([
      0, 4, 5,
    ]);
  });
});
