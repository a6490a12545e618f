import { Redis } from 'ioredis';
import { startTicksApp, TicksApp } from '../src/ticks-app.factory';
import {
  deleteKeys,
  expectedCandles,
  fetchCandles,
  groupDrained,
  publish,
  randomPrefix,
  readDeadLetters,
  recentTicks,
  REDIS_URL,
  testConfig,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('overflow');

/*
 * Two ticks with qty 1e308 in one candle used to store a volume of `inf`, which the API returned
 * as `"volume": null` for good. With the default maxima (1e12) such ticks are invalid; with the
 * maxima raised as far as they go, the candle script refuses the tick that would make a sum
 * non-finite, and it is dead-lettered.
 */
jest.setTimeout(30_000);

describe('volume overflow', () => {
  let redis: Redis;
  const apps: TicksApp[] = [];
  const good = recentTicks(200);
  // The start of a 30-minute candle (so BIG's ticks share their candle in every interval), plus 1 s.
  const ts = Math.floor(good[100].ts / 1_800_000) * 1_800_000 + 1000;
  const big = (qty: number, dt = 0) => ({ symbol: 'BIG', price: 5, qty, ts: ts + dt });

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    for (const app of apps) await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  async function start(name: string, overrides: Record<string, string> = {}): Promise<TicksApp> {
    const app = await startTicksApp(testConfig(`${prefix}${name}:`, overrides));
    apps.push(app);
    return app;
  }

  async function drain(app: TicksApp): Promise<void> {
    await waitFor('every entry read and acknowledged', () =>
      groupDrained(redis, app.config.consumer.stream, 'candles'),
    );
  }

  it('with the default maxima, qty 1e308 is an invalid tick; the candles stay exact', async () => {
    const app = await start('default');
    const ids = await publish(redis, app.config.consumer.stream, [
      ...good.slice(0, 100),
      big(1e308),
      big(1e308, 1),
      ...good.slice(100),
    ]);
    await drain(app);
    for (const symbol of ['SYM001', 'SYM002', 'SYM003'])
      expect(await fetchCandles(app.url, symbol, '1m')).toEqual(
        expectedCandles(good, symbol, '1m'),
      );
    expect((await fetch(`${app.url}/symbols/BIG/price`)).status).toBe(404);
    const dead = await readDeadLetters(redis, app.config);
    expect(dead.map((d) => d.id)).toEqual([ids[100], ids[101]]);
    for (const d of dead) {
      expect(d.reason).toBe('invalid-tick');
      expect(d.error).toBe('invalid tick: qty must be at most 1000000000000 (got 1e+308)');
    }
  });

  it('with the maxima raised, the script refuses the tick that would make a volume infinite', async () => {
    const app = await start('raised', { TICK_MAX_QTY: '1.7976931348623157e308' });
    const bigTicks = [big(2), big(1e308, 1), big(1e308, 2), big(3, 3)];
    const ids = await publish(redis, app.config.consumer.stream, [
      ...good.slice(0, 100),
      ...bigTicks,
      ...good.slice(100),
    ]);
    await drain(app);

    // The second 1e308 is refused; the others are applied and every sum is a finite number.
    const applied = [bigTicks[0], bigTicks[1], bigTicks[3]];
    for (const interval of ['1m', '5m', '30m']) {
      const candles = await fetchCandles(app.url, 'BIG', interval);
      expect(candles).toEqual(expectedCandles(applied, 'BIG', interval));
      expect(candles[0].volume).toBe(1e308);
      expect(candles[0].trades).toBe(3);
    }
    for (const symbol of ['SYM001', 'SYM002', 'SYM003'])
      expect(await fetchCandles(app.url, symbol, '5m')).toEqual(
        expectedCandles(good, symbol, '5m'),
      );
    expect(await app.metrics.value('ticks_handled_total')).toBe(good.length + 3);

    const dead = await readDeadLetters(redis, app.config);
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ id: ids[102], reason: 'volume-overflow' });
    expect(dead[0].error).toBe(
      `volume of the 1m candle of BIG at ${new Date(ts - 1000).toISOString()} would not be finite: 1e+308 so far + qty 1e+308`,
    );
    expect(dead[0].fields).toEqual({ data: JSON.stringify(bigTicks[2]) });
    expect(
      await app.metrics.value('ticks_dead_lettered_total', { reason: 'volume-overflow' }),
    ).toBe(1);

    // What Redis holds is a number, not "inf".
    const stored = await redis.hget(`${prefix}raised:candle:1m:BIG:${ts - 1000}`, 'v');
    expect(Number(stored)).toBe(1e308);
  });
});
