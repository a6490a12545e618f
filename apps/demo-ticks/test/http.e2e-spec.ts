import { Redis } from 'ioredis';
import { startTicksApp, TicksApp } from '../src/ticks-app.factory';
import {
  deleteKeys,
  expectedCandles,
  metricSum,
  metricValue,
  publish,
  randomPrefix,
  readFixture,
  REDIS_URL,
  testConfig,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('http');
const fixture = readFixture();

jest.setTimeout(30_000);

describe('HTTP API', () => {
  let redis: Redis;
  let ticks: TicksApp;
  const get = async (path: string) => {
    const res = await fetch(`${ticks.url}${path}`);
    const text = await res.text();
    let body: any = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON (metrics)
    }
    return { status: res.status, body, type: res.headers.get('content-type') ?? '' };
  };

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ticks = await startTicksApp(testConfig(`${prefix}ok:`));
    await publish(redis, ticks.config.consumer.stream, fixture);
    await waitFor(
      'all ticks handled',
      async () => (await ticks.metrics.value('ticks_handled_total')) === fixture.length,
    );
  });

  afterAll(async () => {
    await ticks?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('GET /symbols lists the symbols seen', async () => {
    expect(await get('/symbols')).toMatchObject({
      status: 200,
      body: { symbols: ['AAA', 'BBB', 'CCC'] },
    });
  });

  it('GET /symbols/:s/price gives the latest price; 404 for an unknown symbol, 400 for an invalid one', async () => {
    const { status, body } = await get('/symbols/BBB/price');
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['price', 'symbol', 'ts']);
    expect(await get('/symbols/NOPE/price')).toMatchObject({
      status: 404,
      body: { message: 'no ticks seen for symbol "NOPE"' },
    });
    const invalid = await get('/symbols/a:b/price');
    expect(invalid.status).toBe(400);
    expect(invalid.body.message).toContain('symbol must be');
  });

  it('GET /symbols/:s/candles: interval and limit select the newest candles, oldest first', async () => {
    const all = expectedCandles(fixture, 'CCC', '5m');
    const { status, body } = await get('/symbols/CCC/candles?interval=5m&limit=3');
    expect(status).toBe(200);
    expect(body.symbol).toBe('CCC');
    expect(body.interval).toBe('5m');
    expect(body.candles.map((c: { start: number }) => c.start)).toEqual(
      all.slice(-3).map((c) => c.start),
    );
    expect(body.candles[0]).toMatchObject({
      ...all[all.length - 3],
      end: all[all.length - 3].start + 300_000,
      closed: true,
    });
    expect(body.candles[2].closed).toBe(false); // the last candle is still open
    // defaults: 1m, 100 candles
    const defaults = await get('/symbols/CCC/candles');
    expect(defaults.body.interval).toBe('1m');
    expect(defaults.body.candles).toHaveLength(expectedCandles(fixture, 'CCC', '1m').length);
  });

  it.each([
    ['interval=2m', 'interval must be one of 1m, 5m, 30m (got "2m")'],
    ['interval=', null],
    ['limit=-1', 'limit must be a whole number from 1 to 1000 (got "-1")'],
    ['limit=0', 'limit must be a whole number from 1 to 1000 (got "0")'],
    ['limit=1.5', 'limit must be a whole number from 1 to 1000'],
    ['limit=abc', 'limit must be a whole number from 1 to 1000'],
    ['limit=1001', 'limit must be a whole number from 1 to 1000'],
    ['limit=1&limit=2', 'limit must be a whole number from 1 to 1000'],
  ])('GET /symbols/AAA/candles?%s gives a clear 400 (or the default)', async (query, message) => {
    const { status, body } = await get(`/symbols/AAA/candles?${query}`);
    if (message === null) expect(status).toBe(200);
    else {
      expect(status).toBe(400);
      expect(body.message).toContain(message);
    }
  });

  it('GET /symbols/NOPE/candles is a 404', async () => {
    expect((await get('/symbols/NOPE/candles?interval=1m')).status).toBe(404);
  });

  it('GET /health is up, with the stream lag and pending count', async () => {
    await waitFor(
      'acks flushed',
      async () => (await get('/health')).body.details?.stream?.pending === 0,
    );
    const { status, body } = await get('/health');
    expect(status).toBe(200);
    expect(body.status).toBe('ok');
    expect(body.details.redis.status).toBe('up');
    expect(body.details.stream).toMatchObject({
      status: 'up',
      stream: ticks.config.consumer.stream,
      group: 'candles',
      lag: 0,
      pending: 0,
    });
    expect(body.details.reclaim).toEqual({
      status: 'up',
      degraded: false,
      backlog: 0,
      consumers: {},
    });
  });

  it('GET /metrics: the app metrics, prom-client process metrics, then the transport metrics (OpenTelemetry)', async () => {
    await waitFor('every XACK sent', async () => ticks.server.pendingAcks === 0);
    const { status, body, type } = await get('/metrics');
    expect(status).toBe(200);
    expect(type).toMatch(/^text\/plain;/);
    expect(type).toContain('version=0.0.4');
    // The app's own.
    expect(metricValue(body, 'ticks_handled_total')).toBe(fixture.length);
    expect(metricValue(body, 'tick_e2e_latency_seconds_count')).toBe(fixture.length);
    expect(metricValue(body, 'ticks_dead_lettered_total')).toBe(0);
    expect(metricValue(body, 'ticks_duplicates_skipped_total', 'layer="effect"')).toBe(0);
    expect(body).toContain('\nticks_reclaim_backlog 0\n');
    expect(body).toContain('\nack_queue_size 0\n');
    // The transport's, for this app's stream: deliveries, XACKs and their sizes, batch durations.
    const stream = { messaging_destination_name: ticks.config.consumer.stream };
    expect(metricSum(body, 'messaging_client_consumed_messages_total', stream)).toBe(
      fixture.length,
    );
    const xacks = metricSum(body, 'redis_streams_xack_calls_total', stream);
    expect(xacks).toBeGreaterThan(0);
    expect(metricSum(body, 'redis_streams_xack_ids_count', stream)).toBe(xacks);
    expect(metricSum(body, 'redis_streams_xack_ids_sum', stream)).toBe(fixture.length);
    expect(ticks.server.metrics()).toMatchObject({ xackCalls: xacks, xackIds: fixture.length });
    expect(
      metricSum(body, 'messaging_process_duration_count', {
        ...stream,
        redis_streams_batch: 'true',
      }),
    ).toBe(ticks.server.metrics().batches);
    expect(body).toMatch(/^# TYPE redis_streams_group_pending gauge$/m);
    expect(body).toMatch(/^target_info\{service_name="demo-ticks"/m);
    // The app's former copies of the transport's figures are gone.
    for (const name of [
      'xack_calls_total',
      'xack_errors_total',
      'ack_batch_size',
      'handlers_in_flight',
      'ticks_handler_errors_total',
      'ticks_batch_duration_seconds',
      'collector_ticks_published_total',
    ])
      expect(body).not.toContain(`# TYPE ${name} `);
    // prom-client's default metrics (registered by PrometheusModule)
    for (const name of [
      'process_resident_memory_bytes',
      'process_cpu_seconds_total',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
    ])
      expect(body).toContain(`# TYPE ${name} `);
    expect(body).toMatch(/^process_cpu_seconds_total /m);
    // durations are in seconds; no metric family twice (the registry and the exporter)
    const names = [...body.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]);
    expect(names.filter((n) => /_ms(_|$)|millis/.test(n))).toEqual([]);
    expect(body).not.toMatch(/^\w+_ms_total[{ ]/m);
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
  });
});

describe('GET /health with thresholds', () => {
  let redis: Redis;
  let ticks: TicksApp;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    // Acks are held back, so the pending count stays above its threshold of 0.
    ticks = await startTicksApp(
      testConfig(`${prefix}down:`, {
        HEALTH_MAX_PENDING: '0',
        ACK_BATCH_SIZE: '100000',
        ACK_INTERVAL_MS: '600000',
      }),
    );
  });

  afterAll(async () => {
    await ticks?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('is down (503) and says why when the pending count is over its limit', async () => {
    await publish(redis, ticks.config.consumer.stream, fixture.slice(0, 10));
    await waitFor('handled', async () => (await ticks.metrics.value('ticks_handled_total')) === 10);
    const res = await fetch(`${ticks.url}/health`);
    const body = (await res.json()) as any;
    expect(res.status).toBe(503);
    expect(body.error.stream.message).toBe('pending 10 > 0');
    expect(body.details.redis.status).toBe('up');
  });
});
