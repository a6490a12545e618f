import { Controller, INestMicroservice, Injectable, ModuleMetadata } from '@nestjs/common';
import { EventEmitter2, EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { ClientProxy, Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { context, metrics, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { Histogram, MeterProvider, MetricData, MetricReader } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { fork } from 'node:child_process';
import path from 'node:path';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  DeadLetteredEvent,
  RedisStreamsBatchContext,
  RedisStreamsContext,
  RedisStreamsModule,
  RedisStreamsRecord,
  RedisStreamsServerOptions,
  RedisStreamsTelemetryEvents,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { DedicatedRedis, startRedisServer } from './support/redis-server';
import {
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  readAll,
  REDIS_URL,
  sleep,
  waitFor,
} from './support/helpers';

/*
 * OpenTelemetry in memory: a MeterProvider with a reader collected by hand, a BasicTracerProvider
 * with an InMemorySpanExporter, and the AsyncLocalStorage context manager, registered globally
 * for this file's first block and removed after it. Each test has streams of its own and reads
 * only the data points of its streams.
 */
const prefix = randomPrefix('telemetry');
const SCOPE = '@nest-redis-resilience/stream-batch-ack';

class ManualReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

interface Point {
  attributes: Record<string, unknown>;
  value: number | Histogram;
}

async function collect(reader: MetricReader): Promise<Map<string, MetricData>> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  const out = new Map<string, MetricData>();
  for (const scope of resourceMetrics.scopeMetrics)
    if (scope.scope.name === SCOPE) for (const m of scope.metrics) out.set(m.descriptor.name, m);
  return out;
}

/** The data points of `name` whose attributes include `match`. */
function points(
  all: Map<string, MetricData>,
  name: string,
  match: Record<string, unknown>,
): Point[] {
  const metric = all.get(name);
  if (!metric) return [];
  return (metric.dataPoints as Point[]).filter((p) =>
    Object.entries(match).every(([k, v]) => p.attributes[k] === v),
  );
}

const sum = (ps: Point[]) => ps.reduce((a, p) => a + (p.value as number), 0);
const histogram = (ps: Point[]) =>
  ps.reduce(
    (a, p) => ({
      count: a.count + (p.value as Histogram).count,
      sum: a.sum + ((p.value as Histogram).sum ?? 0),
    }),
    { count: 0, sum: 0 },
  );

/** Compiles the module, creates the server (its options may use the module: EventEmitter2), starts the app. */
async function start(
  metadata: ModuleMetadata,
  options: (get: <T>(token: new (...args: any[]) => T) => T) => RedisStreamsServerOptions,
): Promise<{ app: INestMicroservice; server: ServerRedisStreams }> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const server = new ServerRedisStreams(options((token) => moduleRef.get(token)));
  const app = moduleRef.createNestMicroservice({ strategy: server, logger: false });
  await app.listen();
  return { app, server };
}

function recordEvents(server: ServerRedisStreams) {
  const seen: { name: keyof RedisStreamsTelemetryEvents; payload: any }[] = [];
  for (const name of [
    'redis_streams.message.dead_lettered',
    'redis_streams.ack.flush_failed',
    'redis_streams.ack.flush_recovered',
    'redis_streams.claim',
  ] as const)
    server.events.on(name, (payload) => seen.push({ name, payload }));
  return seen;
}

describe('OpenTelemetry SDK registered: metrics, spans, events', () => {
  jest.setTimeout(60_000);
  let redis: Redis;
  let reader: ManualReader;
  let meterProvider: MeterProvider;
  let spans: InMemorySpanExporter;
  const apps: INestMicroservice[] = [];
  const clients: ClientProxy[] = [];

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    reader = new ManualReader();
    meterProvider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(meterProvider);
    spans = new InMemorySpanExporter();
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }),
    );
  });

  afterAll(async () => {
    for (const app of apps) await app.close();
    for (const client of clients) await client.close();
    await meterProvider.shutdown();
    metrics.disable();
    trace.disable();
    context.disable();
    propagation.disable();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  const spansOf = (name: string): ReadableSpan[] =>
    spans.getFinishedSpans().filter((s) => s.name === name);

  async function client(): Promise<ClientRedisStreams> {
    const c = new ClientRedisStreams({ connection: REDIS_URL });
    await c.connect();
    clients.push(c);
    return c;
  }

  it('N messages, per-message handler: consumed N, N handler durations, few XACKs acking N ids in all, one CONSUMER span per message', async () => {
    const STREAM = `${prefix}single`;
    const N = 60;
    const handled: string[] = [];
    const activeSpanIds: (string | undefined)[] = [];
    @Controller()
    class Single {
      @StreamEventPattern(STREAM)
      handle(@Payload() _d: unknown, @Ctx() ctx: RedisStreamsContext) {
        handled.push(ctx.id);
        activeSpanIds.push(trace.getActiveSpan()?.spanContext().spanId);
      }
    }
    const { app, server } = await start({ controllers: [Single] }, () => ({
      connection: REDIS_URL,
      group: 'g',
      read: { count: 100, blockMs: 50 },
      ack: { batchSize: 1000, intervalMs: 30 },
    }));
    apps.push(app);
    await produce(
      redis,
      STREAM,
      Array.from({ length: N }, (_, n) => ({ n })),
    );
    await waitFor('N handled', () => handled.length === N);
    await waitFor('N acked', async () => (await pendingCount(redis, STREAM, 'g')) === 0);
    await waitFor('XACK replies', () => server.pendingAcks === 0);

    const all = await collect(reader);
    const match = { 'messaging.destination.name': STREAM };
    expect(sum(points(all, 'messaging.client.consumed.messages', match))).toBe(N);
    const [consumed] = points(all, 'messaging.client.consumed.messages', match);
    expect(consumed.attributes).toEqual({
      'messaging.system': 'redis',
      'messaging.destination.name': STREAM,
      'messaging.consumer.group.name': 'g',
      'messaging.operation.name': 'receive',
      'messaging.operation.type': 'receive',
    });
    const durations = histogram(
      points(all, 'messaging.process.duration', { ...match, 'redis_streams.batch': false }),
    );
    expect(durations.count).toBe(N);
    expect(all.get('messaging.process.duration')!.descriptor.unit).toBe('s');
    const xacks = sum(points(all, 'redis_streams.xack.calls', match));
    expect(xacks).toBeGreaterThanOrEqual(1);
    expect(xacks).toBeLessThanOrEqual(10);
    const ids = histogram(points(all, 'redis_streams.xack.ids', match));
    expect(ids.count).toBe(xacks);
    expect(ids.sum).toBe(N);
    // Gauges: nothing running; the group has nothing pending and no lag (XINFO GROUPS).
    expect(sum(points(all, 'redis_streams.messages.in_flight', match))).toBe(0);
    expect(points(all, 'redis_streams.group.pending', match).map((p) => p.value)).toEqual([0]);
    expect(points(all, 'redis_streams.group.lag', match).map((p) => p.value)).toEqual([0]);
    expect(server.metrics().delivered).toBe(N);
    expect(server.metrics().succeeded).toBe(N);
    // The same XACKs, in process: calls and ids acknowledged.
    expect(server.metrics()).toMatchObject({ xackCalls: xacks, xackIds: N });

    const processSpans = spansOf(`process ${STREAM}`);
    expect(processSpans).toHaveLength(N);
    expect(processSpans.every((s) => s.kind === SpanKind.CONSUMER)).toBe(true);
    expect(processSpans.map((s) => s.attributes['messaging.message.id']).sort()).toEqual(
      [...handled].sort(),
    );
    // No producer context in these entries (written by plain XADD): each span is a root.
    expect(processSpans.every((s) => s.parentSpanContext === undefined)).toBe(true);
    // The handler ran inside its span.
    expect(new Set(activeSpanIds)).toEqual(
      new Set(processSpans.map((s) => s.spanContext().spanId)),
    );
  });

  it('batch handler: one span per batch with a link to each producer span, batch durations, producer spans and traceparent headers; a user traceparent is kept', async () => {
    const STREAM = `${prefix}batch`;
    const N = 40;
    let got = 0;
    @Controller()
    class Batch {
      @StreamEventPattern(STREAM, { batch: true })
      handle(@Payload() items: unknown[], @Ctx() _ctx: RedisStreamsBatchContext) {
        got += items.length;
      }
    }
    const producer = await client();
    const tracer = trace.getTracer('test');
    await tracer.startActiveSpan('produce', async (span) => {
      for (let n = 0; n < N; n++) await lastValueFrom(producer.emit(STREAM, { n }));
      span.end();
    });
    const userTraceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await lastValueFrom(
      producer.emit(STREAM, new RedisStreamsRecord({ n: N }, { traceparent: userTraceparent })),
    );
    const entries = await readAll(redis, STREAM);
    expect(entries).toHaveLength(N + 1);
    const headers = entries.map((e) => JSON.parse(e.fields.headers) as Record<string, string>);
    const sendSpans = spansOf(`send ${STREAM}`);
    expect(sendSpans).toHaveLength(N + 1);
    expect(sendSpans.every((s) => s.kind === SpanKind.PRODUCER)).toBe(true);
    for (let n = 0; n < N; n++) {
      const span = sendSpans.find((s) => s.attributes['messaging.message.id'] === entries[n].id)!;
      expect(headers[n].traceparent).toBe(
        `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`,
      );
    }
    expect(headers[N].traceparent).toBe(userTraceparent);

    const { app, server } = await start({ controllers: [Batch] }, () => ({
      connection: REDIS_URL,
      group: 'g',
      read: { count: 100, blockMs: 50 },
    }));
    apps.push(app);
    await waitFor('all handled', () => got === N + 1);
    await waitFor('acked', async () => (await pendingCount(redis, STREAM, 'g')) === 0);
    await waitFor('XACK replies', () => server.pendingAcks === 0);
    const batchSpans = spansOf(`process ${STREAM}`);
    expect(batchSpans).toHaveLength(server.metrics().batches);
    expect(
      batchSpans.reduce((a, s) => a + Number(s.attributes['messaging.batch.message_count']), 0),
    ).toBe(N + 1);
    const linked = batchSpans.flatMap((s) => s.links.map((l) => l.context.spanId));
    expect(linked.sort()).toEqual(
      [
        // The user's traceparent stands for the last message: its send span is not linked.
        ...sendSpans
          .filter((s) => s.attributes['messaging.message.id'] !== entries[N].id)
          .map((s) => s.spanContext().spanId),
        'b7ad6b7169203331',
      ].sort(),
    );
    const all = await collect(reader);
    const match = { 'messaging.destination.name': STREAM };
    expect(
      histogram(
        points(all, 'messaging.process.duration', { ...match, 'redis_streams.batch': true }),
      ).count,
    ).toBe(server.metrics().batches);
    expect(sum(points(all, 'messaging.client.sent.messages', match))).toBe(N + 1);
    expect(sum(points(all, 'messaging.client.consumed.messages', match))).toBe(N + 1);
  });

  it('a poison message: one dead-letter count, one dead_lettered event, also received by an @OnEvent handler (EventEmitterModule)', async () => {
    const STREAM = `${prefix}poison`;
    const onEvent: DeadLetteredEvent[] = [];
    @Injectable()
    class DeadLetterListener {
      @OnEvent('redis_streams.message.dead_lettered')
      handle(event: DeadLetteredEvent) {
        onEvent.push(event);
      }
    }
    @Controller()
    class Poison {
      @StreamEventPattern(STREAM)
      handle(@Payload() d: { poison?: boolean }) {
        if (d.poison) throw new Error('poison pill');
      }
    }
    const { app, server } = await start(
      {
        // RedisStreamsModule: its error interceptor keeps the handler's own error.
        imports: [EventEmitterModule.forRoot(), RedisStreamsModule.forRoot()],
        controllers: [Poison],
        providers: [DeadLetterListener],
      },
      (get) => ({
        connection: REDIS_URL,
        group: 'g',
        read: { count: 10, blockMs: 50 },
        ack: { intervalMs: 20 },
        retry: { initialMs: 20, maxMs: 40 },
        deadLetter: { maxDeliveries: 3 },
        eventEmitter: get(EventEmitter2),
      }),
    );
    apps.push(app);
    const seen = recordEvents(server);
    const [, poisonId] = await produce(redis, STREAM, [{ ok: 1 }, { poison: true }, { ok: 2 }]);
    await waitFor('dead-lettered', () => server.metrics().deadLettered === 1);
    await waitFor('@OnEvent handler called', () => onEvent.length === 1);
    await sleep(200); // nothing more comes
    const dead = seen.filter((e) => e.name === 'redis_streams.message.dead_lettered');
    expect(dead).toHaveLength(1);
    expect(dead[0].payload).toMatchObject({
      stream: STREAM,
      group: 'g',
      id: poisonId,
      deliveries: 3,
      reason: 'handler-failed',
    });
    expect((dead[0].payload as DeadLetteredEvent).error).toEqual(new Error('poison pill'));
    expect(onEvent).toHaveLength(1);
    expect(onEvent[0].id).toBe(poisonId);

    const all = await collect(reader);
    const match = { 'messaging.destination.name': STREAM };
    expect(sum(points(all, 'redis_streams.messages.dead_lettered', match))).toBe(1);
    expect(
      points(all, 'redis_streams.messages.dead_lettered', match)[0].attributes[
        'redis_streams.dead_letter.reason'
      ],
    ).toBe('handler-failed');
    expect(sum(points(all, 'redis_streams.messages.failed', match))).toBe(3);
    expect(sum(points(all, 'redis_streams.messages.retried', match))).toBe(2);
    const failedDurations = points(all, 'messaging.process.duration', {
      ...match,
      'error.type': 'Error',
    });
    expect(histogram(failedDurations).count).toBe(3);
    const failedSpans = spansOf(`process ${STREAM}`).filter(
      (s) => s.attributes['messaging.message.id'] === poisonId,
    );
    expect(failedSpans).toHaveLength(3);
    expect(failedSpans.every((s) => s.status.code === SpanStatusCode.ERROR)).toBe(true);
    expect(failedSpans[0].events.some((e) => e.name === 'exception')).toBe(true);
    expect(failedSpans.map((s) => s.attributes['redis_streams.message.deliveries']).sort()).toEqual(
      [1, 2, 3],
    );
  });

  it("the claim loop takes over a dead consumer's entries: claim event and counters", async () => {
    const STREAM = `${prefix}claim`;
    const N = 30;
    await redis.xgroup('CREATE', STREAM, 'g', '$', 'MKSTREAM');
    await produce(
      redis,
      STREAM,
      Array.from({ length: N }, (_, n) => ({ n })),
    );
    await redis.xreadgroup('GROUP', 'g', 'dead', 'COUNT', N, 'STREAMS', STREAM, '>');
    await sleep(150); // idle longer than claim.minIdleMs
    let handled = 0;
    @Controller()
    class Claims {
      @StreamEventPattern(STREAM)
      handle() {
        handled++;
      }
    }
    // The server's events exist before listen(): listeners added then see the first claim.
    const moduleRef = await Test.createTestingModule({ controllers: [Claims] }).compile();
    const server = new ServerRedisStreams({
      connection: REDIS_URL,
      group: 'g',
      consumer: 'alive',
      read: { count: 100, blockMs: 50 },
      claim: { minIdleMs: 100, intervalMs: 50, count: 100 },
      retry: { maxMs: 40 },
    });
    const seen = recordEvents(server);
    const app = moduleRef.createNestMicroservice({ strategy: server, logger: false });
    apps.push(app);
    await app.listen();
    await waitFor('handled', () => handled === N);
    const claims = seen.filter((e) => e.name === 'redis_streams.claim').map((e) => e.payload);
    expect(claims.reduce((a, c) => a + c.count, 0)).toBe(N);
    expect(claims[0]).toMatchObject({
      stream: STREAM,
      group: 'g',
      consumer: 'alive',
      from: ['dead'],
    });
    const all = await collect(reader);
    const match = { 'messaging.destination.name': STREAM };
    expect(sum(points(all, 'redis_streams.claim.entries', match))).toBe(N);
    expect(sum(points(all, 'redis_streams.claim.runs', match))).toBeGreaterThanOrEqual(1);
  });

  it('cross-process trace: a producer process emits inside a span; the consumer span here has its trace id and the PRODUCER span as parent', async () => {
    const STREAM = `${prefix}xproc`;
    const received: { traceId?: string }[] = [];
    @Controller()
    class Orders {
      @StreamEventPattern(STREAM)
      handle() {
        received.push({ traceId: trace.getActiveSpan()?.spanContext().traceId });
      }
    }
    const { app } = await start({ controllers: [Orders] }, () => ({
      connection: REDIS_URL,
      group: 'g',
      read: { count: 10, blockMs: 50 },
    }));
    apps.push(app);
    const child = fork(path.join(__dirname, 'support/traced-producer.ts'), [], {
      execArgv: ['--require', path.join(__dirname, '..', '..', '..', 'scripts', 'register-ts.js')],
      env: { ...process.env, REDIS_URL, STREAM },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const fromProducer = await new Promise<{
      traceId: string;
      parentSpanId: string;
      sendSpanId: string;
      sendParentSpanId: string;
      sendKind: SpanKind;
      entryId: string;
    }>((resolve, reject) => {
      child.once('message', resolve as never);
      child.once('exit', (code) =>
        reject(new Error(`producer exited with ${code} before reporting`)),
      );
    });
    expect(fromProducer.sendKind).toBe(SpanKind.PRODUCER);
    expect(fromProducer.sendParentSpanId).toBe(fromProducer.parentSpanId);
    await waitFor('received', () => received.length === 1);
    await waitFor('span ended', () => spansOf(`process ${STREAM}`).length === 1);
    const [consumer] = spansOf(`process ${STREAM}`);
    expect(consumer.spanContext().traceId).toBe(fromProducer.traceId);
    expect(consumer.parentSpanContext?.spanId).toBe(fromProducer.sendSpanId);
    expect(consumer.parentSpanContext?.isRemote).toBe(true);
    expect(consumer.attributes['messaging.message.id']).toBe(fromProducer.entryId);
    expect(received[0].traceId).toBe(fromProducer.traceId);
  }, 120_000); // the producer process loads the TypeScript sources: slow on a busy machine
});

describe('an XACK failing for a while (dedicated redis-server, ACL -xack): flush_failed, then flush_recovered', () => {
  jest.setTimeout(60_000);
  let redisServer: DedicatedRedis;
  let redis: Redis;
  let app: INestMicroservice | undefined;
  let reader: ManualReader;
  let meterProvider: MeterProvider;

  beforeAll(async () => {
    redisServer = await startRedisServer();
    redis = new Redis(redisServer.url);
    reader = new ManualReader();
    meterProvider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(meterProvider);
  });

  afterAll(async () => {
    await app?.close();
    await meterProvider.shutdown();
    metrics.disable();
    await redis.quit();
    await redisServer.stop();
  });

  it('events in order, with the attempt count; the xack failure counter', async () => {
    const STREAM = `${prefix}ackfail`;
    let handled = 0;
    @Controller()
    class Counting {
      @StreamEventPattern(STREAM)
      handle() {
        handled++;
      }
    }
    let server: ServerRedisStreams;
    ({ app, server } = await start({ controllers: [Counting] }, () => ({
      connection: redisServer.url,
      group: 'g',
      read: { count: 50, blockMs: 50 },
      ack: { batchSize: 20, intervalMs: 20, backoff: { initialMs: 20, maxMs: 60 } },
    })));
    const seen = recordEvents(server);
    await redis.call('ACL', 'SETUSER', 'default', '-xack');
    await produce(
      redis,
      STREAM,
      Array.from({ length: 10 }, (_, n) => ({ n })),
    );
    await waitFor('handled', () => handled === 10);
    await waitFor(
      'two failed flushes',
      () => seen.filter((e) => e.name === 'redis_streams.ack.flush_failed').length >= 2,
    );
    await redis.call('ACL', 'SETUSER', 'default', '+xack');
    await waitFor('recovered', () =>
      seen.some((e) => e.name === 'redis_streams.ack.flush_recovered'),
    );
    await waitFor('acked', async () => (await pendingCount(redis, STREAM, 'g')) === 0);
    const failed = seen.filter((e) => e.name === 'redis_streams.ack.flush_failed');
    expect(failed.map((e) => e.payload.attempt)).toEqual(failed.map((_, i) => i + 1));
    expect(failed[0].payload).toMatchObject({ stream: STREAM, group: 'g', count: 10 });
    expect(String(failed[0].payload.error)).toMatch(/NOPERM/);
    const last = seen[seen.length - 1];
    expect(last.name).toBe('redis_streams.ack.flush_recovered');
    expect(last.payload).toMatchObject({
      stream: STREAM,
      group: 'g',
      count: 10,
      failedAttempts: failed.length,
    });
    expect(seen.filter((e) => e.name === 'redis_streams.ack.flush_recovered')).toHaveLength(1);
    const all = await collect(reader);
    const match = { 'messaging.destination.name': STREAM };
    expect(sum(points(all, 'redis_streams.xack.failures', match))).toBe(failed.length);
    expect(sum(points(all, 'redis_streams.xack.calls', match))).toBe(1);
  });
});

describe('without an SDK', () => {
  jest.setTimeout(30_000);
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await deleteKeys(redis, `${prefix}nosdk`);
    await redis.quit();
  });

  it('@opentelemetry/api installed, no tracer provider: no traceparent header is written; handling and server.metrics() work', async () => {
    const STREAM = `${prefix}nosdk:api`;
    let handled = 0;
    @Controller()
    class Plain {
      @StreamEventPattern(STREAM)
      handle(@Ctx() ctx: RedisStreamsContext) {
        if (Object.keys(ctx.headers).length === 0) handled++;
      }
    }
    const { app, server } = await start({ controllers: [Plain] }, () => ({
      connection: REDIS_URL,
      group: 'g',
      read: { count: 10, blockMs: 50 },
    }));
    const producer = new ClientRedisStreams({ connection: REDIS_URL });
    try {
      await producer.connect();
      await lastValueFrom(producer.emit(STREAM, { n: 1 }));
      const [entry] = await readAll(redis, STREAM);
      expect(Object.keys(entry.fields)).toEqual(['data']);
      await waitFor('handled', () => handled === 1);
      expect(server.metrics().delivered).toBe(1);
    } finally {
      await producer.close();
      await app.close();
    }
  });

  it('@opentelemetry/api unresolvable: the package loads and works, writes no headers', async () => {
    const STREAM = `${prefix}nosdk:absent`;
    let pkg!: typeof import('@nest-redis-resilience/stream-batch-ack');
    let microservices!: typeof import('@nestjs/microservices');
    let testing!: typeof import('@nestjs/testing');
    let common!: typeof import('@nestjs/common');
    let server!: ServerRedisStreams;
    let producer!: ClientRedisStreams;
    // The package resolves @opentelemetry/api once per module registry, when a server or client
    // is created: both are created inside the isolated registry, where it cannot be loaded.
    jest.isolateModules(() => {
      jest.doMock('@opentelemetry/api', () => {
        throw new Error("Cannot find module '@opentelemetry/api'");
      });
      common = require('@nestjs/common');
      microservices = require('@nestjs/microservices');
      testing = require('@nestjs/testing');
      pkg = require('@nest-redis-resilience/stream-batch-ack');
      expect(() => require('@opentelemetry/api')).toThrow(/Cannot find module/);
      server = new pkg.ServerRedisStreams({
        connection: REDIS_URL,
        group: 'g',
        read: { count: 10, blockMs: 50 },
      }) as unknown as ServerRedisStreams;
      producer = new pkg.ClientRedisStreams({
        connection: REDIS_URL,
      }) as unknown as ClientRedisStreams;
    });
    jest.dontMock('@opentelemetry/api');
    const handled: Record<string, string>[] = [];
    class Plain {
      handle(_data: unknown, ctx: RedisStreamsContext) {
        handled.push({ ...ctx.headers });
      }
    }
    const descriptor = Object.getOwnPropertyDescriptor(Plain.prototype, 'handle')!;
    // The decorators of the isolated @nestjs/microservices, applied by hand.
    microservices.Payload()(Plain.prototype, 'handle', 0);
    microservices.Ctx()(Plain.prototype, 'handle', 1);
    microservices.EventPattern(STREAM)(Plain.prototype, 'handle', descriptor);
    common.Controller()(Plain);
    const moduleRef = await testing.Test.createTestingModule({ controllers: [Plain] }).compile();
    const events: unknown[] = [];
    server.events.on('redis_streams.claim', (e) => events.push(e));
    const app = moduleRef.createNestMicroservice({ strategy: server, logger: false });
    await app.listen();
    // A tracer provider registered (this registry's API): the isolated package cannot see it.
    const tracerProvider = new BasicTracerProvider();
    trace.setGlobalTracerProvider(tracerProvider);
    try {
      await producer.connect();
      await lastValueFrom(producer.emit(STREAM, { n: 1 }));
      await lastValueFrom(
        producer.emit(STREAM, new pkg.RedisStreamsRecord({ n: 2 }, { tenant: 'a' })),
      );
      await waitFor('handled', () => handled.length === 2);
      expect(handled).toEqual([{}, { tenant: 'a' }]);
      const entries = await readAll(redis, STREAM);
      expect(entries[0].fields.headers).toBeUndefined();
      expect(JSON.parse(entries[1].fields.headers)).toEqual({ tenant: 'a' });
      expect(server.metrics()).toMatchObject({ delivered: 2, succeeded: 2 });
      await waitFor('acked', async () => (await pendingCount(redis, STREAM, 'g')) === 0);
    } finally {
      trace.disable();
      await producer.close();
      await app.close();
    }
  });
});
