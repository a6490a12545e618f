import { parseDuration } from './duration';

describe('parseDuration', () => {
  it('reads ms, s, m, h and d; a bare number is milliseconds', () => {
    expect(parseDuration('1500')).toBe(1500);
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration(' 1.5 s ')).toBe(1500);
    expect(parseDuration('5m')).toBe(300_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('2d')).toBe(2 * 86_400_000);
    expect(parseDuration('0.5ms')).toBe(0.5);
  });

  it('is undefined for anything else', () => {
    for (const text of ['', 'soon', '-1s', '1e3', '1w', '5 minutes', '1h30m'])
      expect(parseDuration(text)).toBeUndefined();
  });
});
