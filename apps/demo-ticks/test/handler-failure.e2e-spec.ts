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

const prefix = randomPrefix('fail');
const fixture = readFixture().slice(0, 300);

/*
 * Writing the candles fails (the symbol set has the wrong Redis type, so the Lua script errors
 * before it writes anything): every batch fails, nothing is acknowledged. Once the key is fixed,
 * the same consumer gets the entries again (its retries with backoff): the transport's
 * idempotency must have forgotten them (a failed run is not "done"), so each tick is applied, once.
 */
jest.setTimeout(30_000);

describe('candle writes fail, then recover (same consumer)', () => {
  let redis: Redis;
  let app: TicksApp;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    await redis.set(`${prefix}symbols`, 'not a set');
    app = await startTicksApp(
      testConfig(prefix, {
        TICKS_CONSUMER: 'only',
        CLAIM_MIN_IDLE_MS: '200',
        CLAIM_INTERVAL_MS: '100',
        MAX_DELIVERIES: '1000',
      }),
    );
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('failed ticks are retried and then counted exactly once', async () => {
    const stream = app.config.consumer.stream;
    await publish(redis, stream, fixture);
    await waitFor(
      'every tick failed once',
      async () => (await app.server.metrics()).failed >= fixture.length,
    );
    expect(await app.metrics.value('ticks_handled_total')).toBe(0);
    expect(await pendingCount(redis, stream, 'candles')).toBe(fixture.length);

    await redis.del(`${prefix}symbols`); // Redis "recovers"
    await waitFor(
      'every tick applied and acknowledged',
      async () =>
        (await app.metrics.value('ticks_handled_total')) === fixture.length &&
        (await pendingCount(redis, stream, 'candles')) === 0,
    );

    // The failed batch calls, counted by the transport (the app no longer copies them).
    expect(app.server.metrics().failed).toBeGreaterThan(0);
    expect(await app.metrics.value('ticks_duplicates_skipped_total')).toBe(0);
    expect(app.server.metrics().duplicatesSkipped).toEqual({ memory: 0, redis: 0 });
    expect(await redis.xlen(app.config.consumer.deadLetterStream)).toBe(0);
    const symbols = [...new Set(fixture.map((t) => t.symbol))];
    for (const symbol of symbols)
      for (const interval of ['1m', '5m', '30m'])
        expect(await fetchCandles(app.url, symbol, interval)).toEqual(
          expectedCandles(fixture, symbol, interval),
        );
  });
});
