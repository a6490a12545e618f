/*
 * Metrics, traces and events against a real Redis, with an in-memory OpenTelemetry SDK
 * registered globally for this file (a MeterProvider read on demand by a Prometheus exporter
 * that starts no server, and a tracer provider exporting to memory). Each test makes its apps
 * after the SDK is registered, as an app does (the meter is taken when StampedeModule starts).
 */
import { Injectable, Module } from '@nestjs/common';
import { EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { Test, TestingModule } from '@nestjs/testing';
import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import {
  DataPointType,
  HistogramMetricData,
  MeterProvider,
  MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  SingleFlight,
  STAMPEDE_EVENTS,
  STAMPEDE_INSTRUMENTATION_SCOPE,
  STAMPEDE_METRICS,
  StampedeEventMap,
  StampedeEventName,
  StampedeModule,
  StampedeModuleOptions,
  StampedeService,
  StampedeTimeoutError,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, ThrowawayRedis, delay, deleteKeys, uniquePrefix } from './support/redis';
import { waitFor } from '../../../test/support/wait';

const SKU = 'sku-7319-secret'; // an argument value: must never show up in telemetry

@Injectable()
class CatalogService {
  loads = 0;
  loaderMs = 50;

  @Cacheable({ ttl: 60_000 })
  @SingleFlight()
  @DistLock({ ttl: 5000, poll: 5 })
  async item(sku: string): Promise<{ sku: string; n: number }> {
    this.loads++;
    // A span the loader makes: it must be a child of the stampede span.
    await trace.getTracer('db').startActiveSpan('db.query', async (span) => {
      await delay(this.loaderMs);
      span.end();
    });
    return { sku, n: this.loads };
  }

  @Cacheable({ ttl: 60_000 })
  @DistLock({ ttl: 5000, poll: 5, wait: 100 })
  async impatient(sku: string): Promise<string> {
    this.loads++;
    await delay(this.loaderMs);
    return sku;
  }

  failing = false;

  @Cacheable({ ttl: 100, grace: 60_000 })
  async flaky(sku: string): Promise<string> {
    if (this.failing) throw new Error('backend down');
    return sku;
  }

  @Cacheable({ ttl: 60_000, timeout: { hard: 50 } })
  async slow(sku: string): Promise<string> {
    await delay(300);
    return sku;
  }
}

/** Receives the events through @nestjs/event-emitter. */
@Injectable()
class Alerts {
  readonly seen: { event: StampedeEventName; payload: unknown }[] = [];

  @OnEvent('stampede.store.unavailable')
  unavailable(payload: StampedeEventMap['stampede.store.unavailable']): void {
    this.seen.push({ event: 'stampede.store.unavailable', payload });
  }

  @OnEvent('stampede.store.recovered')
  recovered(payload: StampedeEventMap['stampede.store.recovered']): void {
    this.seen.push({ event: 'stampede.store.recovered', payload });
  }

  @OnEvent(STAMPEDE_EVENTS.lockTimeout)
  lockTimeout(payload: StampedeEventMap['stampede.lock.timeout']): void {
    this.seen.push({ event: 'stampede.lock.timeout', payload });
  }
}

interface App {
  moduleRef: TestingModule;
  catalog: CatalogService;
  stampede: StampedeService;
  alerts?: Alerts;
}

async function startApp(options: StampedeModuleOptions, withEventEmitter = false): Promise<App> {
  @Module({
    imports: [
      StampedeModule.forRoot(options),
      ...(withEventEmitter ? [EventEmitterModule.forRoot()] : []),
    ],
    providers: [CatalogService, ...(withEventEmitter ? [Alerts] : [])],
  })
  class AppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  await moduleRef.init();
  return {
    moduleRef,
    catalog: moduleRef.get(CatalogService),
    stampede: moduleRef.get(StampedeService),
    alerts: withEventEmitter ? moduleRef.get(Alerts) : undefined,
  };
}

describe('telemetry: OpenTelemetry metrics and spans, operator events', () => {
  jest.setTimeout(60_000);
  const prefix = uniquePrefix('telemetry');
  let redis: Redis;
  let prometheus: PrometheusExporter;
  let meterProvider: MeterProvider;
  let spans: InMemorySpanExporter;
  let tracerProvider: BasicTracerProvider;
  const apps: App[] = [];

  const start = async (options: Partial<StampedeModuleOptions> = {}, events = false) => {
    const app = await startApp({ redis: REDIS_URL, keyPrefix: prefix, ...options }, events);
    apps.push(app);
    return app;
  };

  /** Fresh SDK per test: counters start at zero, spans empty. */
  beforeEach(() => {
    prometheus = new PrometheusExporter({ preventServerStart: true });
    meterProvider = new MeterProvider({ readers: [prometheus] });
    spans = new InMemorySpanExporter();
    tracerProvider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(spans)],
    });
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    metrics.setGlobalMeterProvider(meterProvider);
    trace.setGlobalTracerProvider(tracerProvider);
  });

  afterEach(async () => {
    for (const app of apps.splice(0)) await app.moduleRef.close();
    metrics.disable();
    trace.disable();
    context.disable();
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
    await deleteKeys(redis, prefix);
  });

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await redis.quit();
  });

  async function collect(): Promise<MetricData[]> {
    const { resourceMetrics, errors } = await prometheus.collect();
    expect(errors).toEqual([]);
    return resourceMetrics.scopeMetrics
      .filter((s) => s.scope.name === STAMPEDE_INSTRUMENTATION_SCOPE)
      .flatMap((s) => s.metrics);
  }

  /** The sum of a counter's points whose attributes include `attributes`. */
  function counter(data: MetricData[], name: string, attributes: Record<string, string>): number {
    const metric = data.find((m) => m.descriptor.name === name);
    if (!metric || metric.dataPointType !== DataPointType.SUM) return 0;
    return metric.dataPoints
      .filter((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v))
      .reduce((n, p) => n + p.value, 0);
  }

  const stampedeSpans = () =>
    spans.getFinishedSpans().filter((s) => s.name.startsWith('stampede.'));

  it('1000 concurrent callers on one key: calls, misses, one load, 999 joins; then hits by tier; the same numbers as metrics()', async () => {
    const a = await start({ l1: true });
    const b = await start(); // no L1: its hits read Redis
    const m = { 'stampede.method': 'CatalogService.item' };

    const first = await Promise.all(Array.from({ length: 1000 }, () => a.catalog.item(SKU)));
    expect(first.every((v) => v.n === 1)).toBe(true);
    let data = await collect();
    expect(counter(data, STAMPEDE_METRICS.calls, m)).toBe(1000);
    expect(counter(data, STAMPEDE_METRICS.misses, m)).toBe(1000);
    expect(counter(data, STAMPEDE_METRICS.loads, m)).toBe(1);
    expect(counter(data, STAMPEDE_METRICS.joins, m)).toBe(999);
    expect(counter(data, STAMPEDE_METRICS.hits, m)).toBe(0);

    // Second round: app A answers from its L1, app B from Redis.
    await Promise.all(Array.from({ length: 1000 }, () => a.catalog.item(SKU)));
    for (let i = 0; i < 10; i++) await b.catalog.item(SKU);
    data = await collect();
    expect(counter(data, STAMPEDE_METRICS.calls, m)).toBe(2010);
    expect(counter(data, STAMPEDE_METRICS.hits, { ...m, 'stampede.tier': 'l1' })).toBe(1000);
    expect(counter(data, STAMPEDE_METRICS.hits, { ...m, 'stampede.tier': 'store' })).toBe(10);
    expect(counter(data, STAMPEDE_METRICS.loads, m)).toBe(1);

    // The exported counters are metrics() summed over the two apps: they cannot disagree.
    const [ma, mb] = [a, b].map((app) => app.stampede.metrics()['CatalogService.item']);
    expect(counter(data, STAMPEDE_METRICS.calls, m)).toBe(ma.calls + mb.calls);
    expect(counter(data, STAMPEDE_METRICS.joins, m)).toBe(ma.joins + mb.joins);
    expect(counter(data, STAMPEDE_METRICS.hits, { ...m, 'stampede.tier': 'l1' })).toBe(
      ma.l1Hits + mb.l1Hits,
    );

    // The load duration histogram, in seconds.
    const load = data.find((d) => d.descriptor.name === STAMPEDE_METRICS.loadDuration) as
      HistogramMetricData | undefined;
    expect(load?.descriptor.unit).toBe('s');
    expect(load?.dataPoints[0].value.count).toBe(1);
    expect(load?.dataPoints[0].value.sum).toBeGreaterThanOrEqual(0.04);
    expect(load?.dataPoints[0].value.sum).toBeLessThan(60);

    // Spans: one per call that reached the store or the loader: round 1's leader (its 999
    // joiners reach neither), B's 10 store hits; none for L1 hits.
    const all = stampedeSpans();
    expect(all).toHaveLength(11);
    const loaded = all.filter((s) => s.attributes['stampede.loaded'] === true);
    expect(loaded).toHaveLength(1);
    const [span] = loaded;
    expect(span.name).toBe('stampede.get_or_load CatalogService.item');
    expect(span.kind).toBe(0); // SpanKind.INTERNAL
    expect(span.attributes).toEqual({
      'stampede.method': 'CatalogService.item',
      'stampede.key_pattern': 'CatalogService.item:*',
      'stampede.hit_tier': 'none',
      'stampede.lock_waited': false,
      'stampede.loaded': true,
    });
    expect(all.filter((s) => s.attributes['stampede.hit_tier'] === 'store')).toHaveLength(10);
    // The loader ran inside the span: its own span is a child.
    const db = spans.getFinishedSpans().find((s) => s.name === 'db.query')!;
    expect(db.parentSpanContext?.spanId).toBe(span.spanContext().spanId);
    expect(db.spanContext().traceId).toBe(span.spanContext().traceId);
    // No attribute anywhere holds the raw key or the argument.
    const values = all.flatMap((s) => Object.values(s.attributes).map(String));
    expect(values.some((v) => v.includes(SKU))).toBe(false);
    expect(all.some((s) => s.name.includes(SKU))).toBe(false);

    // What Prometheus shows: dotted names become underscores, counters get _total, no unit
    // is glued to a name (no _ms_total); the unit is declared on its own line.
    const text = new PrometheusSerializer().serialize((await prometheus.collect()).resourceMetrics);
    if (process.env.SHOW_PROMETHEUS) process.stdout.write(text);
    expect(text).toContain('stampede_calls_total{stampede_method="CatalogService.item"');
    expect(text).toContain(
      'stampede_hits_total{stampede_method="CatalogService.item",stampede_tier="l1"',
    );
    expect(text).toContain('# UNIT stampede_load_duration s');
    expect(text).toContain('stampede_load_duration_bucket{');
    expect(text).not.toMatch(/_ms(_total)?\b/);
    expect(text).not.toContain(SKU);
  });

  it('a span for an L1 hit only with telemetry.traceL1Hits', async () => {
    const quiet = await start({ l1: true });
    await quiet.catalog.item('a');
    spans.reset();
    await quiet.catalog.item('a');
    expect(quiet.stampede.metrics()['CatalogService.item'].l1Hits).toBe(1);
    expect(stampedeSpans()).toHaveLength(0);

    const traced = await start({ l1: true, telemetry: { traceL1Hits: true } });
    await traced.catalog.item('a'); // a store hit: fills its L1
    spans.reset();
    await traced.catalog.item('a');
    expect(stampedeSpans().map((s) => s.attributes)).toEqual([
      {
        'stampede.method': 'CatalogService.item',
        'stampede.key_pattern': 'CatalogService.item:*',
        'stampede.hit_tier': 'l1',
        'stampede.lock_waited': false,
        'stampede.loaded': false,
      },
    ]);
  });

  it('telemetry: { metrics: false, tracing: false } reports nothing; getOrLoad without a name is labelled getOrLoad', async () => {
    const off = await start({ telemetry: { metrics: false, tracing: false } });
    await off.catalog.item('b');
    const on = await start();
    await on.stampede.getOrLoad(`user:${SKU}`, () => 'v', { ttl: 1000 });
    const data = await collect();
    expect(
      counter(data, STAMPEDE_METRICS.calls, { 'stampede.method': 'CatalogService.item' }),
    ).toBe(0);
    expect(counter(data, STAMPEDE_METRICS.calls, { 'stampede.method': 'getOrLoad' })).toBe(1);
    expect(stampedeSpans().map((s) => [s.name, s.attributes['stampede.key_pattern']])).toEqual([
      ['stampede.get_or_load getOrLoad', 'user:*'],
    ]);
    // metrics() agrees: a call without a name is counted under `getOrLoad`, never its key.
    expect(on.stampede.metrics().getOrLoad.calls).toBe(1);
    expect(on.stampede.metrics()[`user:${SKU}`]).toBeUndefined();
  });

  it('a lock wait across two app instances: the lock-wait histogram (unit s), the span says so', async () => {
    const a = await start();
    const b = await start();
    a.catalog.loaderMs = 300;
    const first = a.catalog.item('locked');
    await waitFor('A to hold the lock and load', () => a.catalog.loads === 1);
    const [va, vb] = await Promise.all([first, b.catalog.item('locked')]);
    expect(vb).toEqual(va);
    expect(a.catalog.loads + b.catalog.loads).toBe(1);

    const data = await collect();
    const m = { 'stampede.method': 'CatalogService.item' };
    expect(counter(data, STAMPEDE_METRICS.lockWaits, m)).toBeGreaterThanOrEqual(1);
    const waits = data.find((d) => d.descriptor.name === STAMPEDE_METRICS.lockWaitDuration) as
      HistogramMetricData | undefined;
    expect(waits?.descriptor.unit).toBe('s');
    const point = waits!.dataPoints.find(
      (p) => p.attributes['stampede.method'] === m['stampede.method'],
    )!;
    expect(point.value.count).toBeGreaterThanOrEqual(1);
    expect(point.value.sum).toBeGreaterThan(0);
    expect(point.value.sum).toBeLessThan(10); // seconds, not milliseconds
    const waited = stampedeSpans().filter((s) => s.attributes['stampede.lock_waited'] === true);
    expect(waited).toHaveLength(1);
    expect(waited[0].attributes['stampede.loaded']).toBe(false);
  });

  it('a lock wait that times out: stampede.lock.timeout through on() and @OnEvent', async () => {
    const a = await start();
    const b = await start({}, true);
    const seen: StampedeEventMap['stampede.lock.timeout'][] = [];
    const listener = (e: StampedeEventMap['stampede.lock.timeout']) => seen.push(e);
    b.stampede.on('stampede.lock.timeout', listener);
    a.catalog.loaderMs = 600;
    const first = a.catalog.impatient('slow');
    await waitFor('A to hold the lock and load', () => a.catalog.loads === 1);
    await b.catalog.impatient('slow'); // waits 100 ms, then loads without the lock
    await first;
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      method: 'CatalogService.impatient',
      keyPattern: 'CatalogService.impatient:*',
    });
    expect(seen[0].waitedMs).toBeGreaterThanOrEqual(90);
    expect(b.alerts!.seen).toEqual([{ event: 'stampede.lock.timeout', payload: seen[0] }]);
    const data = await collect();
    expect(
      counter(data, STAMPEDE_METRICS.lockTimeouts, {
        'stampede.method': 'CatalogService.impatient',
      }),
    ).toBe(1);
    b.stampede.off('stampede.lock.timeout', listener);
  });

  it('a load past its hard timeout: stampede.load.timeout, and a span with status ERROR', async () => {
    const app = await start();
    const seen: StampedeEventMap['stampede.load.timeout'][] = [];
    app.stampede.on(STAMPEDE_EVENTS.loadTimeout, (e) => seen.push(e));
    await expect(app.catalog.slow(SKU)).rejects.toBeInstanceOf(StampedeTimeoutError);
    expect(seen).toEqual([
      { method: 'CatalogService.slow', keyPattern: 'CatalogService.slow:*', timeoutMs: 50 },
    ]);
    const [span] = stampedeSpans();
    expect(span.status.code).toBe(2); // SpanStatusCode.ERROR
    expect(span.events.map((e) => e.name)).toEqual(['exception']);
    const data = await collect();
    expect(
      counter(data, STAMPEDE_METRICS.loadTimeouts, { 'stampede.method': 'CatalogService.slow' }),
    ).toBe(1);
  });
});

describe('telemetry: grace fail-safe', () => {
  it('a refresh within grace that fails: stampede.failsafe, the stale value is served', async () => {
    const app = await startApp({ store: undefined });
    const seen: StampedeEventMap['stampede.failsafe'][] = [];
    app.stampede.on('stampede.failsafe', (e) => seen.push(e));
    expect(await app.catalog.flaky(SKU)).toBe(SKU);
    app.catalog.failing = true;
    await delay(150); // past the TTL, within grace
    expect(await app.catalog.flaky(SKU)).toBe(SKU); // stale; the refresh fails in the background
    await waitFor('the fail-safe event', () => seen.length === 1);
    expect(seen).toEqual([
      {
        method: 'CatalogService.flaky',
        keyPattern: 'CatalogService.flaky:*',
        error: 'backend down',
      },
    ]);
    expect(app.stampede.metrics()['CatalogService.flaky'].failSafes).toBe(1);
    await app.moduleRef.close();
  });
});

describe('telemetry: the store goes away and comes back (a redis-server of this test)', () => {
  jest.setTimeout(60_000);
  let server: ThrowawayRedis;
  let app: App;

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    app = await startApp({ redis: server.url, operationTimeout: 1000, cooldown: 200 }, true);
  });

  afterAll(async () => {
    await app.moduleRef.close();
    await server.destroy();
  });

  it('stampede.store.unavailable once, stampede.store.recovered once, also at an @OnEvent handler', async () => {
    const seen: { event: string; payload: unknown }[] = [];
    for (const event of ['stampede.store.unavailable', 'stampede.store.recovered'] as const) {
      app.stampede.on(event, (payload) => seen.push({ event, payload }));
    }
    await app.catalog.item('x');
    expect(seen).toEqual([]);

    await server.stop();
    // Many failing calls (each answered by held values or the loader): one event.
    for (let i = 0; i < 20; i++) await app.catalog.item(`down-${i % 3}`);
    expect(app.stampede.metrics()['CatalogService.item'].storeErrors).toBeGreaterThan(1);
    expect(seen).toEqual([
      {
        event: 'stampede.store.unavailable',
        payload: { store: 'redis', error: expect.any(String) },
      },
    ]);

    await server.start();
    await waitFor('the store to recover', async () => {
      await app.catalog.item(`up-${Date.now()}`);
      return seen.length === 2;
    });
    for (let i = 0; i < 10; i++) await app.catalog.item(`up-${i}`);
    expect(seen.map((s) => s.event)).toEqual([
      'stampede.store.unavailable',
      'stampede.store.recovered',
    ]);
    expect((seen[1].payload as { downMs: number }).downMs).toBeGreaterThan(0);
    expect(app.alerts!.seen).toEqual(seen);
  });
});

describe('without @opentelemetry/api installed', () => {
  it('the package loads and getOrLoad works (telemetry off)', async () => {
    let result: unknown;
    let apiSeen: unknown = 'not checked';
    await new Promise<void>((resolve, reject) => {
      jest.isolateModules(() => {
        jest.doMock('@opentelemetry/api', () => {
          throw new Error("Cannot find module '@opentelemetry/api'");
        });
        const lib =
          require('@nest-redis-resilience/stampede') as typeof import('@nest-redis-resilience/stampede');
        const { otelApi } =
          require('../src/telemetry/otel-api') as typeof import('../src/telemetry/otel-api');
        const testing = require('@nestjs/testing') as typeof import('@nestjs/testing');
        apiSeen = otelApi();
        void (async () => {
          const moduleRef = await testing.Test.createTestingModule({
            imports: [lib.StampedeModule.forRoot({})],
          }).compile();
          await moduleRef.init();
          const stampede = moduleRef.get(lib.StampedeService);
          result = await stampede.getOrLoad('k', () => 42);
          result = [result, await stampede.getOrLoad('k', () => 43)];
          await moduleRef.close();
        })().then(resolve, reject);
      });
    });
    expect(apiSeen).toBeUndefined();
    expect(result).toEqual([42, 42]);
  });
});
