import { createHash } from 'node:crypto';
import { encodeBase62 } from './base62';
import { Snowflake } from './snowflake';

/** Characters of a hash code: 62^7 = 3.5e12 codes. */
export const HASH_CODE_LENGTH = 7;
/** Attempts before a hash code creation gives up (each one salts the hash differently). */
export const HASH_MAX_ATTEMPTS = 8;

/** Paths of the app itself: never handed out as codes. */
export const RESERVED_CODES: ReadonlySet<string> = new Set(['health', 'metrics', 'urls']);

/**
 * Hash + Base62: the first 48 bits of SHA-256(url, attempt) in Base62, padded to 7 characters.
 * `attempt` 0 gives the same code for the same URL; a collision retries with attempt + 1.
 */
export function hashCode(url: string, attempt: number): string {
  const digest = createHash('sha256').update(`${attempt}:${url}`).digest();
  const n = digest.readUIntBE(0, 6) % 62 ** HASH_CODE_LENGTH;
  return encodeBase62(n).padStart(HASH_CODE_LENGTH, '0');
}

/** Snowflake + Base62: the id is made here, so creation is a single INSERT. */
export class SnowflakeCodes {
  private readonly snowflake: Snowflake;

  constructor(workerId: number, now?: () => number) {
    this.snowflake = new Snowflake(workerId, now);
  }

  next(): string {
    return encodeBase62(this.snowflake.next());
  }
}

/** SHA-256 of the URL, hex: the column that makes "same URL" a unique-index lookup. */
export function urlHash(url: string): string {
  return createHash('sha256').update(url).digest('hex');
}
