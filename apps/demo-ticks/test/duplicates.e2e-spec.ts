import { Redis } from 'ioredis';
import { startTicksApp, TicksApp } from '../src/ticks-app.factory';
import {
  deleteKeys,
  expectedCandles,
  fetchCandles,
  pendingCount,
  publish,
  randomPrefix,
  readFixture,
  REDIS_URL,
  testConfig,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('dup');
const fixture = readFixture();

/*
 * A lost batch XACK, simulated: consumer A handles every tick but its batched XACK never goes
 * out (batch size and interval far beyond the test), so all entries stay pending. Consumer B,
 * a second app with its own in-process idempotency LRU, claims them (XCLAIM) and gets every
 * tick a second time, as happens after a crash or a lost XACK.
 */
jest.setTimeout(30_000);

describe('the same ticks delivered twice (a lost batch XACK)', () => {
  let redis: Redis;
  let a: TicksApp;
  let b: TicksApp | undefined;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    a = await startTicksApp(
      testConfig(prefix, {
        TICKS_CONSUMER: 'a',
        ACK_BATCH_SIZE: '1000000',
        ACK_INTERVAL_MS: '600000',
        CLAIM_MIN_IDLE_MS: '600000',
      }),
    );
  });

  afterAll(async () => {
    await b?.close();
    await a?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('volumes are not doubled: the second delivery of each tick is skipped', async () => {
    const stream = a.config.consumer.stream;
    await publish(redis, stream, fixture);
    await waitFor(
      'A handled every tick',
      async () => (await a.metrics.value('ticks_handled_total')) === fixture.length,
    );
    expect(await pendingCount(redis, stream, 'candles')).toBe(fixture.length); // no XACK went out

    b = await startTicksApp(
      testConfig(prefix, {
        TICKS_CONSUMER: 'b',
        CLAIM_MIN_IDLE_MS: '50',
        CLAIM_INTERVAL_MS: '50',
      }),
    );
    await waitFor(
      'B acknowledged every entry',
      async () => (await pendingCount(redis, stream, 'candles')) === 0,
    );

    expect(await b.metrics.value('ticks_handled_total')).toBe(0);
    // Skipped by the transport's idempotency check (its Redis records).
    expect(b.server.metrics().duplicatesSkipped.redis).toBe(fixture.length);
    for (const symbol of ['AAA', 'BBB', 'CCC'])
      for (const interval of ['1m', '5m', '30m'])
        expect(await fetchCandles(b.url, symbol, interval)).toEqual(
          expectedCandles(fixture, symbol, interval),
        );
  });

  it('a redelivery to the same process is skipped by the in-memory idempotency LRU', async () => {
    const stream = a.config.consumer.stream;
    await a.close(); // B alone reads from now on
    const before = { ...b!.server.metrics().duplicatesSkipped };
    const skipped = () => {
      const now = b!.server.metrics().duplicatesSkipped;
      return { memory: now.memory - before.memory, redis: now.redis - before.redis };
    };
    // Rewind the group: every entry, already acknowledged, is delivered to B once more.
    await redis.call('XGROUP', 'SETID', stream, 'candles', '0');
    await waitFor(
      () =>
        `B skipped every redelivered entry (skipped ${JSON.stringify(skipped())} of ` +
        `${fixture.length}; B's counts: ${JSON.stringify(b!.server.metrics())})`,
      async () => {
        const { memory, redis: inRedis } = skipped();
        return memory + inRedis >= fixture.length;
      },
    );
    await waitFor(
      'B acknowledged them',
      async () => (await pendingCount(redis, stream, 'candles')) === 0,
    );
    // Every one from the in-process memory: none needed Redis, none ran again.
    expect(skipped()).toEqual({ memory: fixture.length, redis: 0 });
    expect(await b!.metrics.value('ticks_handled_total')).toBe(0);
    for (const symbol of ['AAA', 'BBB', 'CCC'])
      expect(await fetchCandles(b!.url, symbol, '1m')).toEqual(
        expectedCandles(fixture, symbol, '1m'),
      );
  });
});
