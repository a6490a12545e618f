/*
 * IdempotencyStore on its own, against a real Redis: the default-key methods (beginOwned,
 * finishOwned) that the transport uses for entries, and what they keep in Redis.
 */
import { Redis } from 'ioredis';
import { IdempotencyStore } from '@nest-redis-resilience/stream-batch-ack';
import { deleteKeys, randomPrefix, REDIS_URL } from './support/helpers';

const prefix = randomPrefix('idem-store');

describe('IdempotencyStore: entries under the default key (beginOwned / finishOwned)', () => {
  let redis: Redis;
  let other: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    other = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await Promise.all([redis.quit(), other.quit()]);
  });

  const fresh = (...ids: string[]) => ids.map((id) => ({ id, deliveries: 1 }));

  it('(Redis internals inspected) the greatest done id stays the greatest when batches finish out of order', async () => {
    const store = new IdempotencyStore({ redis, keyPrefix: `${prefix}a:` });
    await store.finishOwned('g:s', ['1700000000200-0', '1700000000200-7']);
    await store.finishOwned('g:s', ['1700000000100-3']);
    await store.finishOwned('g:s', ['1700000000200-10']);
    expect(await redis.get(`${prefix}a:g:s:done:max`)).toBe('1700000000200-10');
    expect((await redis.smembers(`${prefix}a:g:s:done:17000000002`)).sort()).toEqual([
      '1700000000200-0',
      '1700000000200-10',
      '1700000000200-7',
    ]);
    expect(await redis.smembers(`${prefix}a:g:s:done:17000000001`)).toEqual(['1700000000100-3']);
  });

  it('another process (empty L1) finds done entries at or below the greatest done id, and takes the ones above it', async () => {
    const keyPrefix = `${prefix}b:`;
    await new IdempotencyStore({ redis, keyPrefix }).finishOwned('g:s', ['5-0', '5-2', '9-1']);
    const store = new IdempotencyStore({ redis: other, keyPrefix });
    const begun = await store.beginOwned('g:s', fresh('5-0', '5-1', '5-2', '9-1', '9-2', '12-0'));
    expect(begun.states).toEqual(['done', 'acquired', 'done', 'done', 'acquired', 'acquired']);
    expect(begun.doneInL2).toBe(3);
    expect(begun.token).toMatch(/^p:/);
    // Now in its L1: found without Redis.
    const again = await store.beginOwned('g:s', fresh('5-0', '9-1'));
    expect(again).toMatchObject({ states: ['done', 'done'], doneInL2: 0 });
  });

  it('a redelivery reads the records too: one an effect script marked done, one another run holds', async () => {
    const keyPrefix = `${prefix}c:`;
    await redis.set(`${keyPrefix}g:s:3-0`, 'done', 'PX', 60_000);
    await redis.set(`${keyPrefix}g:s:3-1`, 'p:another-run', 'PX', 60_000);
    const store = new IdempotencyStore({ redis, keyPrefix });
    const begun = await store.beginOwned('g:s', [
      { id: '3-0', deliveries: 2 },
      { id: '3-1', deliveries: 2 },
      { id: '3-2', deliveries: 2 },
    ]);
    expect(begun.states).toEqual(['done', 'processing', 'acquired']);
  });

  it('the memory store (no Redis) keeps done ids in-process', async () => {
    const store = new IdempotencyStore();
    expect((await store.beginOwned('g:s', fresh('1-0'))).states).toEqual(['acquired']);
    await store.finishOwned('g:s', ['1-0']);
    expect((await store.beginOwned('g:s', fresh('1-0', '1-1'))).states).toEqual([
      'done',
      'acquired',
    ]);
    expect((await store.beginOwned('g:other', fresh('1-0'))).states).toEqual(['acquired']);
  });
});
