import { Redis } from 'ioredis';
import { startTicksApp, TicksApp } from '../src/ticks-app.factory';
import {
  deleteKeys,
  expectedCandles,
  expectedLatest,
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

const prefix = randomPrefix('window');
const DAY = 86_400_000;

/*
 * Ticks whose `ts` is far from the time they reached the stream: one at 2^53 - 1 ms, one in the
 * year 2500, one 2 days old, one 10 minutes ahead. Before the window existed, the far-future ones
 * became each symbol's latest price for good and marked every real candle closed.
 * The window is the default one (1 day back, 1 minute ahead).
 */
jest.setTimeout(30_000);

describe('ticks outside the time window are dead-lettered; nothing else changes', () => {
  let redis: Redis;
  let ticks: TicksApp;
  const good = recentTicks(300);
  const [a, b, c] = ['SYM001', 'SYM002', 'SYM003'];
  const now = Date.now();
  const bad = new Map<string, string>([
    ['max safe integer', JSON.stringify({ symbol: a, price: 1, qty: 1, ts: 2 ** 53 - 1 })],
    ['year 2500', JSON.stringify({ symbol: b, price: 2, qty: 2, ts: Date.UTC(2500, 0, 1) })],
    ['2 days old', JSON.stringify({ symbol: c, price: 3, qty: 3, ts: now - 2 * DAY })],
    ['10 min ahead', JSON.stringify({ symbol: a, price: 4, qty: 4, ts: now + 600_000 })],
  ]);
  const badIds = new Map<string, string>();

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    // '' = the default window (the test helpers widen it for the 2024 fixture).
    ticks = await startTicksApp(
      testConfig(prefix, { TICK_MAX_AGE_MS: '', TICK_MAX_FUTURE_MS: '' }),
    );
    const stream = ticks.config.consumer.stream;
    // good, bad, good, bad, ...: each bad tick between good ones
    let from = 0;
    for (const [what, data] of bad) {
      await publish(redis, stream, good.slice(from, from + 60));
      from += 60;
      badIds.set((await redis.xadd(stream, '*', 'data', data)) as string, what);
    }
    await publish(redis, stream, good.slice(from));
    await waitFor('every entry read and acknowledged', () =>
      groupDrained(redis, stream, 'candles'),
    );
  });

  afterAll(async () => {
    await ticks?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('candles are exactly those of the good ticks, and the last candle is still open', async () => {
    for (const symbol of [a, b, c]) {
      for (const interval of ['1m', '5m', '30m'])
        expect(await fetchCandles(ticks.url, symbol, interval)).toEqual(
          expectedCandles(good, symbol, interval),
        );
      const res = await fetch(`${ticks.url}/symbols/${symbol}/candles?interval=1m&limit=2`);
      const { candles } = (await res.json()) as { candles: { closed: boolean }[] };
      expect(candles.map((x) => x.closed)).toEqual([true, false]);
    }
  });

  it('every good tick was applied once', async () => {
    expect(await ticks.metrics.value('ticks_handled_total')).toBe(good.length);
  });

  it('the latest price of each symbol is its latest good tick', async () => {
    for (const symbol of [a, b, c]) {
      const latest = expectedLatest(good, symbol);
      const res = await fetch(`${ticks.url}/symbols/${symbol}/price`);
      expect(await res.json()).toEqual({ symbol, price: latest.price, ts: latest.ts });
    }
  });

  it('each out-of-window tick is in the dead-letter stream once, with a readable reason', async () => {
    const entries = await readDeadLetters(redis, ticks.config);
    expect(entries.map((e) => e.id).sort()).toEqual([...badIds.keys()].sort());
    const byWhat = new Map(entries.map((e) => [badIds.get(e.id)!, e]));
    for (const e of entries) {
      expect(e.reason).toBe('ts-out-of-window');
      expect(e.stream).toBe(ticks.config.consumer.stream);
      expect(e.problem).toBeUndefined();
      expect(e.fields).toEqual({ data: bad.get(badIds.get(e.id)!) });
    }
    expect(byWhat.get('max safe integer')!.error).toMatch(
      /^ts 9007199254740991 is .* after the tick reached the stream .*; at most 60000 ms ahead is accepted \(TICK_MAX_FUTURE_MS\)$/,
    );
    expect(byWhat.get('year 2500')!.error).toContain('years after the tick reached the stream');
    expect(byWhat.get('10 min ahead')!.error).toContain('min after the tick reached the stream');
    expect(byWhat.get('2 days old')!.error).toMatch(
      /^ts \d+ is 2\.0 days before the tick reached the stream .*; at most 86400000 ms back is accepted \(TICK_MAX_AGE_MS\)$/,
    );
    expect(
      await ticks.metrics.value('ticks_dead_lettered_total', { reason: 'ts-out-of-window' }),
    ).toBe(bad.size);
  });
});
