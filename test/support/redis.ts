import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/** The Redis of the test run (scripts/with-redis.js sets REDIS_URL). */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key prefix of this test run alone; cleanup deletes only keys under it. */
export function uniquePrefix(name: string): string {
  return `test:${name}:${randomBytes(4).toString('hex')}:`;
}

/** Deletes the keys under one prefix only (never FLUSHDB). */
export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}
