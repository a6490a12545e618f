import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { Redis } from 'ioredis';
import {
  Idempotent,
  RedisStreamsBatchContext,
  RedisStreamsContext,
  RedisStreamsServerMetrics,
  RedisStreamsServerOptions,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { applyBatchEffects } from './support/batch-effect';
import {
  deleteKeys,
  pendingCount,
  pendingIds,
  produce,
  randomPrefix,
  REDIS_URL,
  sleep,
  startMicroservice,
  waitFor,
} from './support/helpers';

jest.setTimeout(90_000);

const prefix = randomPrefix('idempotency');
const GROUP = 'g';
const IDEM = `${prefix}idem:`;
const DUPS = `${prefix}dups`;
const BUSY = `${prefix}busy`;
const TWICE = `${prefix}twice`;
const FAILS = `${prefix}fails`;
const MEMORY = `${prefix}memory`;
const DEFAULT_MEMORY = `${prefix}default-memory`;
const EXACT = `${prefix}exact`;
const EFFECTS = `${prefix}effects`;

const record = (key: string) => `${IDEM}${GROUP}:${key}`;

interface Order {
  key: string;
}
/** Handler calls per stream: the key and the context. */
const calls = new Map<string, { key: string; ctx: RedisStreamsContext }[]>();
function called(stream: string, order: Order, ctx: RedisStreamsContext): void {
  calls.set(stream, [...(calls.get(stream) ?? []), { key: order.key, ctx }]);
}
const callsOf = (stream: string) => calls.get(stream) ?? [];
const keysRun = (stream: string) => callsOf(stream).map((c) => c.key);

@Controller()
class DupsController {
  @StreamEventPattern(DUPS)
  @Idempotent({ key: (order: Order) => order.key })
  handle(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext) {
    called(DUPS, order, ctx);
  }
}

let busyRanAt = 0;
@Controller()
class BusyController {
  @StreamEventPattern(BUSY)
  @Idempotent({ key: (order: Order) => order.key })
  handle(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext) {
    called(BUSY, order, ctx);
    if (order.key === 'k-busy') busyRanAt = Date.now();
  }
}

@Controller()
class TwiceController {
  @StreamEventPattern(TWICE)
  @Idempotent({ key: (order: Order) => order.key })
  handle(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext) {
    called(TWICE, order, ctx);
  }
}

const failOnce = new Set(['f-2']);
@Controller()
class FailsController {
  @StreamEventPattern(FAILS)
  @Idempotent({ key: (order: Order) => order.key })
  handle(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext) {
    called(FAILS, order, ctx);
    if (failOnce.delete(order.key)) throw new Error(`${order.key}: gateway timeout`);
  }
}

@Controller()
class MemoryController {
  @StreamEventPattern(MEMORY)
  @Idempotent({ key: (order: Order) => order.key })
  handle(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext) {
    called(MEMORY, order, ctx);
  }
}

@Controller()
class DefaultMemoryController {
  @StreamEventPattern(DEFAULT_MEMORY)
  @Idempotent({ key: (order: Order) => order.key })
  handle(@Payload() order: Order, @Ctx() ctx: RedisStreamsContext) {
    called(DEFAULT_MEMORY, order, ctx);
  }
}

const options = (consumer: string): RedisStreamsServerOptions => ({
  connection: REDIS_URL,
  group: GROUP,
  consumer,
  read: { count: 50, blockMs: 50 },
  ack: { batchSize: 100, intervalMs: 20 },
  claim: { minIdleMs: 30_000, intervalMs: 30_000 },
  retry: { initialMs: 100, factor: 2, maxMs: 400, jitter: 0 },
  idempotency: { store: 'redis', keyPrefix: IDEM },
});

describe('transport idempotency: @Idempotent({ key }) and the idempotency server option', () => {
  let redis: Redis;
  let app: INestMicroservice | undefined;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('duplicates of a processed key are skipped and acknowledged: L1 in the same consumer, L2 (Redis) in another', async () => {
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice({ controllers: [DupsController] }, options('c1')));
    await produce(redis, DUPS, [{ key: 'o-1' }, { key: 'o-2' }, { key: 'o-3' }]);
    await waitFor(
      '3 orders run and acked',
      async () => keysRun(DUPS).length === 3 && (await pendingCount(redis, DUPS, GROUP)) === 0,
    );
    expect(await redis.get(record('o-1'))).toBe('done');
    const pttl = await redis.pttl(record('o-1'));
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(60_000); // the default ttlMs

    // the same keys again, to the same consumer: its in-process L1 knows them
    await produce(redis, DUPS, [{ key: 'o-1' }, { key: 'o-2' }]);
    await waitFor(
      '2 duplicates skipped and acked',
      async () =>
        server.metrics().duplicatesSkipped.memory === 2 &&
        (await pendingCount(redis, DUPS, GROUP)) === 0,
    );
    expect(server.metrics().duplicatesSkipped.redis).toBe(0);
    await app.close();

    // another consumer (an empty L1): Redis knows them
    ({ app, server } = await startMicroservice({ controllers: [DupsController] }, options('c2')));
    await produce(redis, DUPS, [{ key: 'o-3' }, { key: 'o-1' }, { key: 'o-4' }]);
    await waitFor(
      'o-4 run, 2 duplicates skipped and everything acked',
      async () =>
        keysRun(DUPS).length === 4 &&
        server.metrics().duplicatesSkipped.redis === 2 &&
        (await pendingCount(redis, DUPS, GROUP)) === 0,
    );
    expect(keysRun(DUPS)).toEqual(['o-1', 'o-2', 'o-3', 'o-4']);
    expect(server.metrics()).toMatchObject({
      duplicatesSkipped: { memory: 0, redis: 2 },
      succeeded: 1, // skipped duplicates are acknowledged, not run
      inProgressSkipped: 0,
    });
    // the handler ran with the L2 handle of its record
    const last = callsOf(DUPS)[3].ctx;
    expect(last.idempotency).toMatchObject({ record: record('o-4'), ttlMs: 60_000 });
    expect(last.idempotency!.token).toMatch(/^p:/);
  });

  it("a key in progress elsewhere is skipped without an ack, and runs once the holder's lock has expired", async () => {
    let server: ServerRedisStreams;
    // claim.minIdleMs is 30 s: the entry comes back when the lock ends, not through a claim
    ({ app, server } = await startMicroservice({ controllers: [BusyController] }, options('c1')));
    // another consumer holds 'k-busy' (its in-progress token, as begin() writes it), for 1.5 s
    const LOCK_MS = 1500;
    await redis.set(record('k-busy'), 'p:another-consumer', 'PX', LOCK_MS);
    const lockEndsAt = Date.now() + LOCK_MS;
    const [busyId] = await produce(redis, BUSY, [{ key: 'k-busy' }, { key: 'k-free' }]);
    await waitFor(
      'k-free run and acked, k-busy skipped and still pending',
      async () =>
        keysRun(BUSY).includes('k-free') &&
        server.metrics().inProgressSkipped >= 1 &&
        (await pendingIds(redis, BUSY, GROUP)).join() === busyId,
    );
    expect(keysRun(BUSY)).toEqual(['k-free']);
    expect(await redis.get(record('k-busy'))).toBe('p:another-consumer'); // left alone

    // the holder never finishes (it died): its lock expires, and the entry runs here
    await waitFor(
      'k-busy run and acked',
      async () =>
        keysRun(BUSY).includes('k-busy') && (await pendingCount(redis, BUSY, GROUP)) === 0,
      LOCK_MS + 10_000,
    );
    expect(keysRun(BUSY)).toEqual(['k-free', 'k-busy']);
    expect(busyRanAt).toBeGreaterThanOrEqual(lockEndsAt);
    expect(busyRanAt).toBeLessThan(lockEndsAt + 5000);
    // waited for the lock, not for the delivery limit or the claim of a dead consumer
    const busy = callsOf(BUSY)[1].ctx;
    expect(busy.deliveries).toBeGreaterThan(1);
    expect(busy.deliveries).toBeLessThanOrEqual(5);
    expect(await redis.get(record('k-busy'))).toBe('done');
    expect(await redis.xlen(`${BUSY}:dlq`)).toBe(0);
  });

  it('a key twice in one read batch runs once; the duplicate is acknowledged soon after, not after claim.minIdleMs', async () => {
    await produce(redis, TWICE, [{ key: 't-1' }, { key: 't-2' }, { key: 't-1' }, { key: 't-1' }]);
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice({ controllers: [TwiceController] }, options('c1')));
    await waitFor(
      'every entry acked',
      async () => keysRun(TWICE).length === 2 && (await pendingCount(redis, TWICE, GROUP)) === 0,
      10_000, // claim.minIdleMs is 30 s
    );
    expect(keysRun(TWICE)).toEqual(['t-1', 't-2']);
    const m = server.metrics();
    expect(m.duplicatesSkipped.memory + m.duplicatesSkipped.redis).toBe(2);
    expect(m.succeeded).toBe(2);
    expect(await redis.xlen(`${TWICE}:dlq`)).toBe(0);
  });

  it('a failed run is forgotten, so that its retry runs (and is not taken for a duplicate)', async () => {
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice({ controllers: [FailsController] }, options('c1')));
    await produce(redis, FAILS, [{ key: 'f-1' }, { key: 'f-2' }, { key: 'f-3' }]);
    await waitFor(
      'f-2 retried and everything acked',
      async () =>
        keysRun(FAILS).length === 4 &&
        server.pendingAcks === 0 &&
        (await pendingCount(redis, FAILS, GROUP)) === 0,
    );
    expect(keysRun(FAILS).filter((k) => k === 'f-2')).toHaveLength(2);
    expect(callsOf(FAILS).map((c) => [c.key, c.ctx.deliveries])).toEqual(
      expect.arrayContaining([
        ['f-2', 1],
        ['f-2', 2],
      ]),
    );
    expect(server.metrics()).toMatchObject({
      failed: 1,
      retried: 1,
      succeeded: 3,
      duplicatesSkipped: { memory: 0, redis: 0 },
      inProgressSkipped: 0,
    });
    for (const key of ['f-1', 'f-2', 'f-3']) expect(await redis.get(record(key))).toBe('done');
  });

  it("store: 'memory' filters duplicates in-process without Redis records (and @Idempotent() alone uses it)", async () => {
    const memoryPrefix = `${prefix}memidem:`;
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [MemoryController] },
      { ...options('c1'), idempotency: { store: 'memory', keyPrefix: memoryPrefix } },
    ));
    await produce(redis, MEMORY, [{ key: 'm-1' }, { key: 'm-2' }]);
    await waitFor(
      '2 run and acked',
      async () => keysRun(MEMORY).length === 2 && (await pendingCount(redis, MEMORY, GROUP)) === 0,
    );
    await produce(redis, MEMORY, [{ key: 'm-2' }, { key: 'm-1' }, { key: 'm-3' }]);
    await waitFor(
      'm-3 run, 2 duplicates skipped and acked',
      async () =>
        keysRun(MEMORY).length === 3 &&
        server.metrics().duplicatesSkipped.memory === 2 &&
        (await pendingCount(redis, MEMORY, GROUP)) === 0,
    );
    expect(keysRun(MEMORY)).toEqual(['m-1', 'm-2', 'm-3']);
    expect(server.metrics().duplicatesSkipped.redis).toBe(0);
    expect(callsOf(MEMORY).every((c) => c.ctx.idempotency === undefined)).toBe(true); // no L2 handle
    expect(await redis.keys(`${memoryPrefix}*`)).toEqual([]);
    await app.close();

    // no idempotency server option: @Idempotent() turns the memory store on for its handler
    const { idempotency: _none, ...noIdempotency } = options('c1');
    ({ app, server } = await startMicroservice(
      { controllers: [DefaultMemoryController] },
      noIdempotency,
    ));
    await produce(redis, DEFAULT_MEMORY, [{ key: 'd-1' }]);
    await waitFor('d-1 run', () => keysRun(DEFAULT_MEMORY).length === 1);
    await waitFor(
      'd-1 acked',
      async () => (await pendingCount(redis, DEFAULT_MEMORY, GROUP)) === 0,
    );
    await produce(redis, DEFAULT_MEMORY, [{ key: 'd-1' }]);
    await waitFor(
      'the duplicate skipped and acked',
      async () =>
        server.metrics().duplicatesSkipped.memory === 1 &&
        (await pendingCount(redis, DEFAULT_MEMORY, GROUP)) === 0,
    );
    expect(keysRun(DEFAULT_MEMORY)).toEqual(['d-1']);
    expect(await redis.exists(`sba:idem:${GROUP}:d-1`)).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// Exactly-once effects: a batch handler whose effect and done marks are one Lua script
// (IDEMPOTENT_EFFECT_LUA), two consumers, one of them a process killed with SIGKILL mid-stream.
// ---------------------------------------------------------------------------------------------

const N = 10_000;
const LOCK_MS = 4000;
const MIN_IDLE_MS = 1500;
const DELAY_MS = 30;
let effectsClient: Redis;
const appliedByB = new Set<number>();

@Controller()
class ExactController {
  @StreamEventPattern(EXACT, { batch: true })
  @Idempotent({ key: (tick: { n: number }) => `n:${tick.n}` })
  async handle(@Payload() ticks: { n: number }[], @Ctx() ctx: RedisStreamsBatchContext) {
    await sleep(DELAY_MS);
    for (const n of await applyBatchEffects(effectsClient, EFFECTS, ticks, ctx)) appliedByB.add(n);
  }
}

interface Worker {
  child: ChildProcess;
  applied: Set<number>;
  ready: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  metrics?: RedisStreamsServerMetrics;
}

function forkWorker(consumer: string, env: Record<string, string>): Worker {
  const child = fork(path.join(__dirname, 'support/batch-effect-worker.ts'), [], {
    execArgv: ['--require', path.join(__dirname, '..', '..', '..', 'scripts', 'register-ts.js')],
    env: {
      ...process.env,
      REDIS_URL,
      STREAM: EXACT,
      GROUP,
      CONSUMER: consumer,
      EFFECTS,
      IDEM_PREFIX: IDEM,
      LOCK_MS: String(LOCK_MS),
      MIN_IDLE_MS: String(MIN_IDLE_MS),
      DELAY_MS: String(DELAY_MS),
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const worker: Partial<Worker> = { child, applied: new Set() };
  worker.ready = new Promise<void>((resolve, reject) => {
    child.on('message', (m: any) => {
      if (m.ready) resolve();
      if (Array.isArray(m.applied)) for (const n of m.applied as number[]) worker.applied!.add(n);
      if (m.metrics) worker.metrics = m.metrics as RedisStreamsServerMetrics;
    });
    child.once('exit', (code) => reject(new Error(`worker ${consumer} exited (${code})`)));
  });
  worker.ready.catch(() => undefined);
  worker.exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return worker as Worker;
}

describe('exactly-once effects with IDEMPOTENT_EFFECT_LUA: two consumers, one killed with SIGKILL', () => {
  let redis: Redis;
  let app: INestMicroservice | undefined;
  const workers: Worker[] = [];

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    effectsClient = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effectsClient.quit();
  });

  it(`${N} messages: every effect applied exactly once, none missing, nothing pending`, async () => {
    // Consumer A, a process of its own, never acknowledges (its acks would go out after 60 s):
    // everything it applied stays pending, for B (and later C) to claim. Its handler lingers
    // after applying a batch's effects, so that the kill lands between the effects and the
    // transport's own done marks (without the atomic helper, those batches would run twice).
    const a = forkWorker('A', {
      ACK_INTERVAL_MS: '60000',
      ACK_BATCH_SIZE: '100000',
      AFTER_MS: '200',
      CONCURRENCY: '200',
    });
    workers.push(a);
    await a.ready;
    a.child.on('message', () => {
      if (a.applied.size >= N / 10 && !a.child.killed) a.child.kill('SIGKILL');
    });
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [ExactController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'B',
        concurrency: 50,
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 200, intervalMs: 50 },
        claim: { minIdleMs: MIN_IDLE_MS, intervalMs: 100, count: 500 },
        deadLetter: { maxDeliveries: 20 },
        idempotency: { store: 'redis', keyPrefix: IDEM, lockMs: LOCK_MS },
      },
    ));
    for (let from = 0; from < N; from += 1000)
      await produce(
        redis,
        EXACT,
        Array.from({ length: 1000 }, (_, i) => ({ n: from + i })),
      );

    // A is killed as soon as it reports a tenth of the stream applied.
    await waitFor('A applied a tenth of the stream and was killed', () => a.child.killed, 30_000);
    expect((await a.exited).signal).toBe('SIGKILL');
    const appliedByA = new Set(a.applied);

    // A replacement process joins the survivor B.
    const c = forkWorker('C', {});
    workers.push(c);
    await waitFor(
      'every effect applied and nothing pending',
      async () =>
        (await redis.hlen(EFFECTS)) === N &&
        (await pendingCount(redis, EXACT, GROUP)) === 0 &&
        server.pendingAcks === 0,
      50_000,
      100,
    );
    await c.ready;
    c.child.send('close');
    expect((await c.exited).code).toBe(0);
    await waitFor("C's metrics received", () => c.metrics !== undefined);

    const effects = await redis.hgetall(EFFECTS);
    const missing = Array.from({ length: N }, (_, n) => n).filter((n) => !(String(n) in effects));
    expect(missing).toEqual([]);
    expect(Object.entries(effects).filter(([, count]) => count !== '1')).toEqual([]);
    expect(Object.keys(effects)).toHaveLength(N);
    // No consumer applied an effect that another one applied too.
    const both = (x: Set<number>, y: Set<number>) => [...x].filter((n) => y.has(n));
    expect(both(appliedByA, appliedByB)).toEqual([]);
    expect(both(appliedByA, c.applied)).toEqual([]);
    expect(both(appliedByB, c.applied)).toEqual([]);
    // A acknowledged nothing: B and C claimed everything it applied, and found it done in Redis.
    expect(appliedByA.size).toBeGreaterThanOrEqual(N / 10);
    const skippedInL2 =
      server.metrics().duplicatesSkipped.redis + c.metrics!.duplicatesSkipped.redis;
    expect(skippedInL2).toBeGreaterThanOrEqual(appliedByA.size);
    // Every record ends done (no in-progress mark left behind).
    const pipeline = redis.pipeline();
    for (let n = 0; n < N; n++) pipeline.get(record(`n:${n}`));
    const marks = ((await pipeline.exec()) ?? []).map(([, v]) => v);
    expect(marks.filter((v) => v !== 'done')).toEqual([]);
    expect(await redis.xlen(`${EXACT}:dlq`)).toBe(0);
  });
});
