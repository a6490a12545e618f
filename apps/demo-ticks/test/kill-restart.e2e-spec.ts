import { Redis } from 'ioredis';
import {
  appliedIds,
  deleteKeys,
  expectedCandles,
  fetchCandles,
  metricSum,
  metricValue,
  pendingCount,
  publish,
  randomPrefix,
  readFixture,
  REDIS_URL,
  testEnv,
  waitFor,
} from './support/helpers';
import { TicksWorker } from './support/worker';

const prefix = randomPrefix('kill');
const fixture = readFixture();
const STREAM = `${prefix}ticks`;

jest.setTimeout(180_000);

describe('consumer process killed (SIGKILL) in the middle and restarted', () => {
  let redis: Redis;
  let first: TicksWorker | undefined;
  let second: TicksWorker | undefined;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await first?.kill();
    await second?.stop();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('the final candles are exact: nothing lost, nothing counted twice, the open candle kept', async () => {
    const split = Math.floor(fixture.length * 0.6);
    const ids = await publish(redis, STREAM, fixture.slice(0, split));

    // The first consumer, slowed down (10 entries at a time), never sends its batched XACK.
    first = await TicksWorker.start(
      testEnv(prefix, {
        TICKS_CONSUMER: 'worker',
        READ_COUNT: '10',
        CONCURRENCY: '10',
        ACK_BATCH_SIZE: '1000000',
        ACK_INTERVAL_MS: '600000',
        CLAIM_MIN_IDLE_MS: '600000',
        // The batch in flight at the kill stays "in progress" this long.
        IDEMPOTENCY_LOCK_MS: '1000',
      }),
    );
    await waitFor(
      'a third of the ticks applied',
      async () => (await appliedIds(redis, prefix, STREAM)).size >= split / 3,
      30_000,
      20,
    );
    await first.kill();

    const appliedByFirst = await appliedIds(redis, prefix, STREAM);
    expect(appliedByFirst.size).toBeGreaterThan(0);
    expect(appliedByFirst.size).toBeLessThanOrEqual(split);
    expect(await pendingCount(redis, STREAM, 'candles')).toBeGreaterThanOrEqual(
      appliedByFirst.size,
    );

    ids.push(...(await publish(redis, STREAM, fixture.slice(split))));

    // Restarted under the same consumer name; it claims the entries left pending by the crash.
    second = await TicksWorker.start(
      testEnv(prefix, {
        TICKS_CONSUMER: 'worker',
        CLAIM_MIN_IDLE_MS: '100',
        CLAIM_INTERVAL_MS: '100',
      }),
    );
    await waitFor(
      'every entry handled and acknowledged',
      async () => {
        const info = (await redis.call('XINFO', 'GROUPS', STREAM)) as unknown[][];
        const lag = Number(info[0][info[0].indexOf('lag') + 1]);
        return lag === 0 && (await pendingCount(redis, STREAM, 'candles')) === 0;
      },
      30_000,
    );

    for (const symbol of ['AAA', 'BBB', 'CCC'])
      for (const interval of ['1m', '5m', '30m'])
        expect(await fetchCandles(second.url, symbol, interval)).toEqual(
          expectedCandles(fixture, symbol, interval),
        );

    // What the restarted consumer did: the rest applied, the first one's work skipped.
    const metrics = await (await fetch(`${second.url}/metrics`)).text();
    expect(metricValue(metrics, 'ticks_handled_total')).toBe(fixture.length - appliedByFirst.size);
    // Skipped by the transport (recorded through OpenTelemetry, on the same page).
    expect(
      metricSum(metrics, 'redis_streams_messages_duplicates_skipped_total', {
        messaging_destination_name: STREAM,
        redis_streams_idempotency_layer: 'redis',
      }),
    ).toBe(appliedByFirst.size);
    expect(metricSum(metrics, 'messaging_client_consumed_messages_total')).toBeGreaterThan(0);
    expect(metricSum(metrics, 'redis_streams_xack_calls_total')).toBeGreaterThan(0);
    expect(metrics).toMatch(/^process_cpu_seconds_total /m);
    expect(metrics).not.toMatch(/^\w+_ms_total[{ ]/m);

    // A candle that was open at the kill holds ticks from both sides of it.
    const applied = ids.map((id) => appliedByFirst.has(id));
    const spans = new Map<string, Set<boolean>>();
    fixture.forEach((t, i) => {
      const key = `${t.symbol}:${Math.floor(t.ts / 1_800_000)}`;
      if (!spans.has(key)) spans.set(key, new Set());
      spans.get(key)!.add(applied[i]);
    });
    expect([...spans.values()].some((s) => s.size === 2)).toBe(true);
  });
});
