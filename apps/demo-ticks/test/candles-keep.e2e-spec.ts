import { Redis } from 'ioredis';
import { startTicksApp, TicksApp } from '../src/ticks-app.factory';
import {
  deleteKeys,
  fetchCandles,
  groupDrained,
  publish,
  randomPrefix,
  REDIS_URL,
  testConfig,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('keep');

/*
 * CANDLES_KEEP=2: the candle script deletes the oldest candles of a symbol beyond the last two.
 * A batch that adds a new candle (pruning an old one) and then a late tick of that old candle
 * must not leave a partial candle hash behind (the script reads a pruned candle again).
 */
jest.setTimeout(30_000);

describe('CANDLES_KEEP prunes old candles, also when a late tick of one comes in the same batch', () => {
  let redis: Redis;
  let ticks: TicksApp;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ticks = await startTicksApp(testConfig(prefix, { CANDLES_KEEP: '2' }));
  });

  afterAll(async () => {
    await ticks?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('keeps the newest two 1m candles and no trace of the pruned ones', async () => {
    const t0 = Math.floor((Date.now() - 3_600_000) / 1_800_000) * 1_800_000; // a 30m candle start
    const at = (minute: number, price: number) => ({
      symbol: 'K',
      price,
      qty: 1,
      ts: t0 + minute * 60_000 + 1,
    });
    const stream = ticks.config.consumer.stream;
    await publish(redis, stream, [at(0, 10), at(1, 11)]);
    await waitFor('drained', () => groupDrained(redis, stream, 'candles'));
    // In one MULTI, so that the blocked reader gets both entries in one batch.
    await redis
      .multi()
      .xadd(stream, '*', 'data', JSON.stringify(at(3, 13)))
      .xadd(stream, '*', 'data', JSON.stringify(at(0, 9)))
      .exec();
    await waitFor('drained', () => groupDrained(redis, stream, 'candles'));

    const candles = await fetchCandles(ticks.url, 'K', '1m');
    expect(candles.map((c) => (c.start - t0) / 60_000)).toEqual([1, 3]);
    expect(await redis.exists(`${prefix}candle:1m:K:${t0}`)).toBe(0);
    expect(await redis.zrange(`${prefix}index:1m:K`, '0', '-1')).toEqual([
      String(t0 + 60_000),
      String(t0 + 180_000),
    ]);
    // the 30m candle has all four ticks (open: the first of the two at the same ts)
    expect(await fetchCandles(ticks.url, 'K', '30m')).toEqual([
      { start: t0, open: 10, high: 13, low: 9, close: 13, volume: 4, trades: 4 },
    ]);
  });
});
