import { decodeBase62, encodeBase62, isValidCode, MAX_CODE_LENGTH } from './base62';

describe('Base62', () => {
  it('encodes the article examples and round-trips ids up to 2^63 - 1', () => {
    expect(encodeBase62(0)).toBe('0');
    expect(encodeBase62(61)).toBe('Z');
    expect(encodeBase62(62)).toBe('10');
    expect(encodeBase62(11157)).toBe('2TX');
    for (const n of [1n, 125n, 3843n, 238327n, 2n ** 41n, 2n ** 63n - 1n]) {
      expect(decodeBase62(encodeBase62(n))).toBe(n);
    }
  });

  it('never needs more than MAX_CODE_LENGTH digits for a 63-bit id', () => {
    expect(encodeBase62(2n ** 63n - 1n).length).toBeLessThanOrEqual(MAX_CODE_LENGTH);
  });

  it('accepts only 1..11 Base62 characters as a code', () => {
    expect(isValidCode('aZ09')).toBe(true);
    expect(isValidCode('a'.repeat(11))).toBe(true);
    expect(isValidCode('a'.repeat(12))).toBe(false);
    expect(isValidCode('')).toBe(false);
    expect(isValidCode('ab-c')).toBe(false);
    expect(isValidCode('été')).toBe(false);
  });

  it('refuses negative numbers and non-Base62 digits', () => {
    expect(() => encodeBase62(-1)).toThrow(RangeError);
    expect(() => decodeBase62('a_b')).toThrow(RangeError);
  });
});
