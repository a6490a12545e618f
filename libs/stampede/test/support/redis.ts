import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key prefix of this test run alone; cleanup deletes only keys under it. */
export function uniquePrefix(name: string): string {
  return `test:${name}:${randomBytes(4).toString('hex')}:`;
}

export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
}

export { freePort, ThrowawayRedis, waitForRedis } from '../../../../test/support/throwaway-redis';

export const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
