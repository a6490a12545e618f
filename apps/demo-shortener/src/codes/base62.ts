export const BASE62_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** Longest code any strategy produces: a 64-bit id in Base62 has at most 11 digits. */
export const MAX_CODE_LENGTH = 11;

const CODE_PATTERN = new RegExp(`^[0-9a-zA-Z]{1,${MAX_CODE_LENGTH}}$`);

/** True when `code` could have been produced by this app (Base62, 1..11 characters). */
export function isValidCode(code: string): boolean {
  return CODE_PATTERN.test(code);
}

/** Base62 digits of a non-negative integer (most significant first). */
export function encodeBase62(value: bigint | number): string {
  let n = BigInt(value);
  if (n < 0n) throw new RangeError(`Base62 encodes non-negative integers, got ${n}`);
  if (n === 0n) return '0';
  let out = '';
  while (n > 0n) {
    out = BASE62_ALPHABET[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out;
}

export function decodeBase62(code: string): bigint {
  let n = 0n;
  for (const ch of code) {
    const digit = BASE62_ALPHABET.indexOf(ch);
    if (digit < 0) throw new RangeError(`"${ch}" is not a Base62 digit`);
    n = n * 62n + BigInt(digit);
  }
  return n;
}
