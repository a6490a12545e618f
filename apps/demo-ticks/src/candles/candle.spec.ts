import { compareEntryIds, decodeCandle, entryIdTime } from './candle';
import { bucketStart, isIntervalName } from './interval';

describe('bucketStart', () => {
  it('puts a tick exactly on a boundary into the candle that starts there', () => {
    expect(bucketStart(120_000, '1m')).toBe(120_000);
    expect(bucketStart(119_999, '1m')).toBe(60_000);
    expect(bucketStart(300_000, '5m')).toBe(300_000);
    expect(bucketStart(299_999, '5m')).toBe(0);
    expect(bucketStart(1_800_000 * 3 + 1, '30m')).toBe(1_800_000 * 3);
  });

  it('aligns to the epoch (UTC), whatever the time', () => {
    const ts = Date.UTC(2024, 0, 1, 12, 34, 56, 789);
    expect(bucketStart(ts, '1m')).toBe(Date.UTC(2024, 0, 1, 12, 34));
    expect(bucketStart(ts, '5m')).toBe(Date.UTC(2024, 0, 1, 12, 30));
    expect(bucketStart(ts, '30m')).toBe(Date.UTC(2024, 0, 1, 12, 30));
  });
});

describe('isIntervalName', () => {
  it('knows 1m, 5m and 30m only', () => {
    expect(['1m', '5m', '30m'].every(isIntervalName)).toBe(true);
    expect(['2m', '1h', '', 'toString', undefined, 60].some(isIntervalName)).toBe(false);
  });
});

describe('entry ids', () => {
  it('are ordered by time, then by sequence, numerically', () => {
    const ids = ['10-2', '9-5', '10-10', '10-1', '100-0'];
    expect([...ids].sort(compareEntryIds)).toEqual(['9-5', '10-1', '10-2', '10-10', '100-0']);
    expect(entryIdTime('1700000000123-7')).toBe(1_700_000_000_123);
  });
});

describe('decodeCandle', () => {
  const hash = { o: '10.5', h: '12', l: '9.25', c: '11', v: '7.75', n: '4' };

  it('turns the stored hash into numbers, with its end and whether it is closed', () => {
    expect(decodeCandle(hash, 60_000, '1m', 119_999)).toEqual({
      start: 60_000,
      end: 120_000,
      open: 10.5,
      high: 12,
      low: 9.25,
      close: 11,
      volume: 7.75,
      trades: 4,
      closed: false,
    });
    expect(decodeCandle(hash, 60_000, '1m', 120_000)?.closed).toBe(true);
  });

  it('ignores an incomplete hash', () => {
    expect(decodeCandle({ o: '1' }, 0, '1m', 0)).toBeUndefined();
  });
});
