/*
 * Transport idempotency under the default key (the stream and the entry id), with the Redis
 * store: the pending entries list holds an entry for one consumer at a time, so nothing marks it
 * in progress; after the handler, its id joins the done set of its slice of ids.
 */
import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { Redis } from 'ioredis';
import {
  Idempotent,
  RedisStreamsBatchContext,
  RedisStreamsContext,
  RedisStreamsServerOptions,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  pendingIds,
  produce,
  randomPrefix,
  REDIS_URL,
  startMicroservice,
  waitFor,
} from './support/helpers';

jest.setTimeout(90_000);

const prefix = randomPrefix('idem-default');
const GROUP = 'g';
const IDEM = `${prefix}idem:`;
const MARKS = `${prefix}marks`;
const AGAIN = `${prefix}again`;
const HELD = `${prefix}held`;
const CRASH = `${prefix}crash`;
const EFFECTS = `${prefix}effects`;

let redis: Redis;

const idemKeys = async (): Promise<string[]> => (await redis.keys(`${IDEM}*`)).sort();

let keysDuringHandler: string[] | undefined;
const marked: string[] = [];
@Controller()
class MarksController {
  @StreamEventPattern(MARKS, { batch: true })
  async handle(@Payload() _orders: unknown[], @Ctx() ctx: RedisStreamsBatchContext) {
    keysDuringHandler ??= await idemKeys();
    marked.push(...ctx.entries.map((e) => e.id));
  }
}

const againRuns: { id: string; deliveries: number }[] = [];
@Controller()
class AgainController {
  @StreamEventPattern(AGAIN)
  handle(@Payload() _order: unknown, @Ctx() ctx: RedisStreamsContext) {
    againRuns.push({ id: ctx.id, deliveries: ctx.deliveries });
  }
}

const heldRuns: { deliveries: number; at: number }[] = [];
let heldUntil = 0;
@Controller()
class HeldController {
  @StreamEventPattern(HELD)
  @Idempotent({ ttlMs: 60_000 })
  async handle(@Payload() _order: unknown, @Ctx() ctx: RedisStreamsContext) {
    heldRuns.push({ deliveries: ctx.deliveries, at: Date.now() });
    if (ctx.deliveries === 1) {
      // Before its retry, another run takes the entry's record in progress for 1.5 s (as an
      // earlier version's begin() or @Idempotent({ key }) writes it).
      await redis.set(`${IDEM}${GROUP}:${HELD}:${ctx.id}`, 'p:another-run', 'PX', 1500);
      heldUntil = Date.now() + 1500;
      throw new Error('first delivery fails');
    }
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
  deadLetter: { maxDeliveries: 20 },
  idempotency: { store: 'redis', keyPrefix: IDEM },
});

beforeAll(() => {
  redis = new Redis(REDIS_URL);
});

afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe('transport idempotency, default key, Redis store', () => {
  let app: INestMicroservice | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('(Redis internals inspected) no in-progress mark; after the handler, each id joins the done set of its slice, which expires ttlMs after its last mark', async () => {
    ({ app } = await startMicroservice({ controllers: [MarksController] }, options('c1')));
    const ids = await produce(
      redis,
      MARKS,
      Array.from({ length: 20 }, (_, n) => ({ n })),
    );
    await waitFor(
      '20 entries handled and acked',
      async () => marked.length === 20 && (await pendingCount(redis, MARKS, GROUP)) === 0,
    );
    expect(keysDuringHandler).toEqual([]);
    const keys = await idemKeys();
    const scope = `${IDEM}${GROUP}:${MARKS}:done:`;
    const sets = keys.filter((k) => k !== `${scope}max`);
    // No key per entry: only sets of ids (one per 100 ms of ids) and the greatest done id.
    expect(keys).toContain(`${scope}max`);
    expect(sets.length).toBeGreaterThan(0);
    expect(sets.every((k) => /:done:\d+$/.test(k))).toBe(true);
    const members = (await Promise.all(sets.map((k) => redis.smembers(k)))).flat();
    expect(members.sort()).toEqual([...ids].sort());
    expect(await redis.get(`${scope}max`)).toBe(ids[ids.length - 1]);
    for (const key of keys) {
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000); // the default ttlMs
    }
  });

  it('entries handled before and handed out again as first deliveries (the group set back, as after a lost group) are skipped and acked: by L1 in the same consumer, by Redis in another', async () => {
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice({ controllers: [AgainController] }, options('c1')));
    const first = await produce(
      redis,
      AGAIN,
      Array.from({ length: 5 }, (_, n) => ({ n })),
    );
    await waitFor(
      '5 run and acked',
      async () => againRuns.length === 5 && (await pendingCount(redis, AGAIN, GROUP)) === 0,
    );

    await redis.xgroup('SETID', AGAIN, GROUP, '0');
    await waitFor(
      '5 duplicates skipped in L1 and acked',
      async () =>
        server.metrics().duplicatesSkipped.memory === 5 &&
        server.pendingAcks === 0 &&
        (await pendingCount(redis, AGAIN, GROUP)) === 0,
    );
    expect(server.metrics().duplicatesSkipped.redis).toBe(0);
    await app.close();

    // Another consumer, an empty L1: Redis knows them. New entries above them run.
    ({ app, server } = await startMicroservice({ controllers: [AgainController] }, options('c2')));
    await redis.xgroup('SETID', AGAIN, GROUP, '0');
    const later = await produce(redis, AGAIN, [{ n: 5 }, { n: 6 }]);
    await waitFor(
      '5 duplicates skipped in Redis, 2 new entries run, everything acked',
      async () =>
        server.metrics().duplicatesSkipped.redis === 5 &&
        againRuns.length === 7 &&
        (await pendingCount(redis, AGAIN, GROUP)) === 0,
    );
    expect(againRuns.map((r) => r.id).sort()).toEqual([...first, ...later].sort());
    expect(againRuns.every((r) => r.deliveries === 1)).toBe(true);
    expect(server.metrics()).toMatchObject({ succeeded: 2, inProgressSkipped: 0 });
  });

  it("a redelivery whose record another run holds in progress is left pending until that run's lock ends, then runs", async () => {
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice({ controllers: [HeldController] }, options('c1')));
    const [id] = await produce(redis, HELD, [{ n: 1 }]);
    await waitFor('the retry skipped while held', () => server.metrics().inProgressSkipped >= 1);
    expect(heldRuns).toHaveLength(1);
    expect(await pendingIds(redis, HELD, GROUP)).toEqual([id]);
    await waitFor(
      'run after the lock ended and acked',
      async () => heldRuns.length === 2 && (await pendingCount(redis, HELD, GROUP)) === 0,
      10_000,
    );
    expect(heldRuns[1].deliveries).toBeGreaterThan(2);
    expect(heldRuns[1].at).toBeGreaterThanOrEqual(heldUntil);
    expect(await redis.xlen(`${HELD}:dlq`)).toBe(0);
  });
});

describe('transport idempotency, default key: a consumer killed between its handler and the done mark', () => {
  const N = 30;
  const HANG_AFTER = 10;
  let worker: ChildProcess | undefined;
  let app: INestMicroservice | undefined;
  const seenByB: number[] = [];

  @Controller()
  class SurvivorController {
    @StreamEventPattern(CRASH)
    @Idempotent({ ttlMs: 60_000 })
    async handle(@Payload() data: { n: number }) {
      seenByB.push(data.n);
      await redis.hincrby(EFFECTS, String(data.n), 1);
    }
  }

  afterAll(async () => {
    if (worker && worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
    await app?.close();
  });

  it('the entry whose done mark was not written runs again (as documented); those marked done are skipped', async () => {
    await produce(
      redis,
      CRASH,
      Array.from({ length: N }, (_, n) => ({ n })),
    );
    // Consumer A handles one entry at a time, never acknowledges, and hangs after the side effect of n = 10.
    let stuck = false;
    worker = fork(path.join(__dirname, 'support/consumer-worker.ts'), [], {
      execArgv: ['--require', path.join(__dirname, '..', '..', '..', 'scripts', 'register-ts.js')],
      env: {
        ...process.env,
        REDIS_URL,
        STREAM: CRASH,
        GROUP,
        CONSUMER: 'A',
        EFFECTS,
        IDEM_PREFIX: IDEM,
        HANG_AFTER: String(HANG_AFTER),
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      worker!.once('exit', (_code, signal) => resolve(signal)),
    );
    worker.on('message', (m: { stuck?: number }) => {
      if (m.stuck === HANG_AFTER) stuck = true;
    });
    // A forked process that loads the TypeScript sources: slow to start on a busy machine.
    await waitFor('consumer A hung after the side effect', () => stuck, 120_000);
    worker.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    expect(await pendingCount(redis, CRASH, GROUP)).toBe(HANG_AFTER + 1);

    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [SurvivorController] },
      {
        ...options('B'),
        claim: { minIdleMs: 200, intervalMs: 50, count: 500 },
        retry: { initialMs: 50, factor: 2, maxMs: 100, jitter: 0 },
      },
    ));
    await waitFor(
      'every entry handled and nothing pending',
      async () =>
        Object.keys(await redis.hgetall(EFFECTS)).length === N &&
        (await pendingCount(redis, CRASH, GROUP)) === 0,
      30_000,
    );
    const effects = await redis.hgetall(EFFECTS);
    const twice = Object.entries(effects).filter(([, count]) => count !== '1');
    expect(twice).toEqual([[String(HANG_AFTER), '2']]);
    expect([...seenByB].sort((a, b) => a - b)).toEqual(
      Array.from({ length: N - HANG_AFTER }, (_, i) => HANG_AFTER + i),
    );
    expect(server.metrics().duplicatesSkipped.redis).toBe(HANG_AFTER);
    expect(await redis.xlen(`${CRASH}:dlq`)).toBe(0);
  }, 240_000);
});
