import { Redis } from 'ioredis';
import { startTicksApp, TicksApp } from '../src/ticks-app.factory';
import {
  deleteKeys,
  expectedCandles,
  fetchCandles,
  FIXTURE,
  pendingCount,
  randomPrefix,
  readFixture,
  REDIS_URL,
  testConfig,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('replay');
const fixture = readFixture();

jest.setTimeout(30_000);

describe('replaying a fixed file of ticks through the in-process collector', () => {
  let redis: Redis;
  let ticks: TicksApp;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ticks = await startTicksApp(
      testConfig(prefix, { COLLECTOR: 'true', COLLECTOR_REPLAY_FILE: FIXTURE }),
    );
    await waitFor(
      'every tick of the file handled',
      async () => (await ticks.metrics.value('ticks_handled_total')) >= fixture.length,
    );
  });

  afterAll(async () => {
    await ticks?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('the file has ticks on minute boundaries, out of order within a candle and tied in time', () => {
    expect(fixture.some((t) => t.ts % 60_000 === 0)).toBe(true);
    expect(fixture.some((t) => t.ts % 60_000 === 59_999)).toBe(true);
    const outOfOrder = fixture.some(
      (t, i) =>
        i > 0 &&
        fixture[i - 1].symbol === t.symbol &&
        Math.floor(fixture[i - 1].ts / 60_000) === Math.floor(t.ts / 60_000) &&
        fixture[i - 1].ts > t.ts,
    );
    expect(outOfOrder).toBe(true);
    expect(fixture.some((t, i) => i > 0 && fixture[i - 1].ts === t.ts)).toBe(true);
  });

  it.each(['1m', '5m', '30m'])(
    '%s candles of every symbol equal the ones computed independently from the file',
    async (interval) => {
      for (const symbol of ['AAA', 'BBB', 'CCC']) {
        const expected = expectedCandles(fixture, symbol, interval);
        expect(expected.length).toBeGreaterThan(1);
        expect(await fetchCandles(ticks.url, symbol, interval)).toEqual(expected);
      }
    },
  );

  it('each tick was applied once: trade counts and volumes add up to the file', async () => {
    expect(await ticks.metrics.value('ticks_handled_total')).toBe(fixture.length);
    expect(await ticks.metrics.value('ticks_duplicates_skipped_total')).toBe(0);
    expect(ticks.server.metrics().duplicatesSkipped).toEqual({ memory: 0, redis: 0 });
    let trades = 0;
    let volume = 0;
    for (const symbol of ['AAA', 'BBB', 'CCC'])
      for (const c of await fetchCandles(ticks.url, symbol, '30m')) {
        trades += c.trades;
        volume += c.volume;
      }
    expect(trades).toBe(fixture.length);
    expect(volume).toBe(fixture.reduce((s, t) => s + t.qty, 0));
  });

  it('the latest price of a symbol is its tick with the greatest timestamp', async () => {
    const res = await fetch(`${ticks.url}/symbols/AAA/price`);
    const aaa = fixture
      .map((t, i) => ({ t, i }))
      .filter(({ t }) => t.symbol === 'AAA')
      .sort((a, b) => b.t.ts - a.t.ts || b.i - a.i)[0].t;
    expect(await res.json()).toEqual({ symbol: 'AAA', price: aaa.price, ts: aaa.ts });
  });

  it('every entry is acknowledged, in batches (far fewer XACK calls than ticks)', async () => {
    await waitFor(
      'no entry pending',
      async () => (await pendingCount(redis, ticks.config.consumer.stream, 'candles')) === 0,
    );
    const { xackCalls: xacks, xackIds } = ticks.server.metrics();
    expect(xackIds).toBe(fixture.length);
    expect(xacks).toBeGreaterThan(0);
    expect(xacks).toBeLessThan(fixture.length / 10);
  });
});
