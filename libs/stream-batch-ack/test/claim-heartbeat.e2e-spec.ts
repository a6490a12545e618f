import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import {
  RedisStreamsBatchContext,
  RedisStreamsContext,
  RedisStreamsServerOptions,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  REDIS_URL,
  sleep,
  startMicroservice,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('heartbeat');
const SLOW = `${prefix}slow`;
const SLOW_BATCH = `${prefix}slow-batch`;
const QUEUED = `${prefix}queued-acks`;
const TAKEN = `${prefix}taken`;
const HANGS = `${prefix}hangs`;
const EFFECTS = `${prefix}effects`;
const GROUP = 'g';
const HANDLER_MS = 3500;
/**
 * The heartbeat runs every third of it, so a stall of the test's process longer than two thirds
 * of it (1.7 s) lets the other consumer take an entry over; a busy machine stalls for 1 s.
 */
const MIN_IDLE_MS = 2500;

/** Every delivery a handler saw: which consumer, which entry, its delivery count. */
const runs: { stream: string; id: string; consumer: string; deliveries: number }[] = [];
let effects: Redis;
/** Ids of HANGS whose handler never ends on consumer 'dying'. */
const hung: string[] = [];

@Controller()
class SlowController {
  @StreamEventPattern(SLOW)
  async slow(@Payload() data: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    runs.push({ stream: SLOW, id: ctx.id, consumer: ctx.consumer, deliveries: ctx.deliveries });
    await sleep(HANDLER_MS);
    await effects.hincrby(EFFECTS, `${SLOW}:${data.n}`, 1);
  }

  @StreamEventPattern(SLOW_BATCH, { batch: true })
  async slowBatch(@Payload() batch: { n: number }[], @Ctx() ctx: RedisStreamsBatchContext) {
    for (const e of ctx.entries)
      runs.push({ stream: SLOW_BATCH, id: e.id, consumer: ctx.consumer, deliveries: e.deliveries });
    await sleep(HANDLER_MS);
    for (const data of batch) await effects.hincrby(EFFECTS, `${SLOW_BATCH}:${data.n}`, 1);
  }

  /** Fast; its acks wait in the batcher (ack.intervalMs) far longer than claim.minIdleMs. */
  @StreamEventPattern(QUEUED)
  async queued(@Payload() data: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    runs.push({ stream: QUEUED, id: ctx.id, consumer: ctx.consumer, deliveries: ctx.deliveries });
    await effects.hincrby(EFFECTS, `${QUEUED}:${data.n}`, 1);
  }

  @StreamEventPattern(TAKEN)
  async taken(@Payload() _data: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    runs.push({ stream: TAKEN, id: ctx.id, consumer: ctx.consumer, deliveries: ctx.deliveries });
    await sleep(3 * MIN_IDLE_MS); // past the test's checks: its XACK would drop the entry
  }

  @StreamEventPattern(HANGS)
  async hangs(@Payload() data: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    runs.push({ stream: HANGS, id: ctx.id, consumer: ctx.consumer, deliveries: ctx.deliveries });
    if (ctx.consumer === 'dying') {
      hung.push(ctx.id);
      await new Promise(() => undefined); // never ends: its server is closed under it
    }
    await effects.hincrby(EFFECTS, `${HANGS}:${data.n}`, 1);
  }
}

const options = (consumer: string, extra: Partial<RedisStreamsServerOptions> = {}) => ({
  connection: REDIS_URL,
  group: GROUP,
  consumer,
  read: { count: 50, blockMs: 50 },
  ack: { batchSize: 1000, intervalMs: 20 },
  claim: { minIdleMs: MIN_IDLE_MS, intervalMs: 100, count: 500 },
  ...extra,
});

type Owner = [id: string, consumer: string, idleMs: number, deliveries: number];
const pendingRows = async (redis: Redis, stream: string) =>
  (await redis.call('XPENDING', stream, GROUP, '-', '+', 1000)) as Owner[];

describe('claim heartbeat: a live consumer keeps its entries while their handlers run', () => {
  let redis: Redis;
  const apps: INestMicroservice[] = [];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    effects = new Redis(REDIS_URL);
    for (const consumer of ['A', 'B']) {
      const { app } = await startMicroservice(
        { controllers: [SlowController] },
        options(consumer, {
          // QUEUED's acks leave after 2 x claim.minIdleMs, which the ids spend in the batcher.
          ack: { batchSize: 10_000, intervalMs: 2 * MIN_IDLE_MS },
        }),
      );
      apps.push(app);
    }
  });

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effects.quit();
  });

  const ranOnce = async (stream: string, n: number) => {
    const ids = await produce(
      redis,
      stream,
      Array.from({ length: n }, (_, i) => ({ n: i })),
    );
    await waitFor(
      `the ${n} entries of ${stream} handled and acknowledged`,
      async () =>
        (await pendingCount(redis, stream, GROUP)) === 0 &&
        Object.keys(await effects.hgetall(EFFECTS)).filter((k) => k.startsWith(`${stream}:`))
          .length === n,
      20_000,
      100,
    );
    // One more claim interval and minIdleMs: a late second run would show up now.
    await sleep(MIN_IDLE_MS + 300);
    const all = await effects.hgetall(EFFECTS);
    for (let i = 0; i < n; i++) expect([i, all[`${stream}:${i}`]]).toEqual([i, '1']);
    const seen = runs.filter((r) => r.stream === stream);
    expect(seen.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(seen.filter((r) => r.deliveries !== 1)).toEqual([]);
  };

  it(`per-message handlers that take ${HANDLER_MS} ms with claim.minIdleMs ${MIN_IDLE_MS}: each entry runs once`, async () => {
    await ranOnce(SLOW, 20);
  }, 40_000);

  it(`a batch handler that takes ${HANDLER_MS} ms: each entry runs once`, async () => {
    await ranOnce(SLOW_BATCH, 20);
  }, 40_000);

  it('entries whose handler finished but whose XACK waits in the batcher are not claimed by the other consumer', async () => {
    await ranOnce(QUEUED, 20);
  }, 40_000);
});

describe('claim heartbeat: only entries this consumer still owns are refreshed', () => {
  let redis: Redis;
  let app: INestMicroservice | undefined;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    effects = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effects.quit();
  });

  it('the heartbeat counts no delivery and never takes back an entry that another consumer took over', async () => {
    ({ app } = await startMicroservice({ controllers: [SlowController] }, options('A')));
    const [id] = await produce(redis, TAKEN, [{ n: 0 }]);
    await waitFor('the entry delivered', () => runs.some((r) => r.id === id));
    // A few heartbeats (every minIdleMs / 3) later: still A's, idle below minIdleMs, one delivery.
    await sleep(MIN_IDLE_MS);
    let [row] = await pendingRows(redis, TAKEN);
    expect(row[1]).toBe('A');
    expect(Number(row[2])).toBeLessThan(MIN_IDLE_MS);
    expect(Number(row[3])).toBe(1);
    // As if A had stalled and another consumer had legitimately taken the entry over. A's claim
    // loop leaves it alone (its handler still runs here), and so must its heartbeat.
    await redis.call('XCLAIM', TAKEN, GROUP, 'C', 0, id, 'JUSTID');
    await sleep(MIN_IDLE_MS);
    [row] = await pendingRows(redis, TAKEN);
    expect(row[1]).toBe('C');
    expect(Number(row[2])).toBeGreaterThanOrEqual(MIN_IDLE_MS - 100);
  }, 30_000);
});

describe('claim heartbeat: a consumer that is gone still has its entries reclaimed', () => {
  let redis: Redis;
  let survivor: INestMicroservice | undefined;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    effects = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await survivor?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effects.quit();
  });

  it('a server closed while its handlers hang (no ack): the other consumer claims and runs them after minIdleMs', async () => {
    const dying = await startMicroservice(
      { controllers: [SlowController] },
      options('dying', { shutdownTimeoutMs: 200 }),
    );
    const ids = await produce(
      redis,
      HANGS,
      Array.from({ length: 5 }, (_, i) => ({ n: i })),
    );
    await waitFor('the dying consumer holds every entry', () => hung.length === 5);
    // Its heartbeat ran while the handlers hung: the entries stayed its own, idle below minIdleMs.
    await sleep(MIN_IDLE_MS + 200);
    const rows = await pendingRows(redis, HANGS);
    expect(rows.map((r) => r[1])).toEqual(ids.map(() => 'dying'));
    expect(rows.every((r) => Number(r[2]) < MIN_IDLE_MS)).toBe(true);
    await dying.app.close();

    ({ app: survivor } = await startMicroservice(
      { controllers: [SlowController] },
      options('survivor'),
    ));
    await waitFor(
      'the survivor ran every entry and nothing is pending',
      async () =>
        (await pendingCount(redis, HANGS, GROUP)) === 0 &&
        Object.keys(await effects.hgetall(EFFECTS)).filter((k) => k.startsWith(`${HANGS}:`))
          .length === 5,
      20_000,
      100,
    );
    const bySurvivor = runs.filter((r) => r.stream === HANGS && r.consumer === 'survivor');
    expect(bySurvivor.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(bySurvivor.every((r) => r.deliveries === 2)).toBe(true);
  }, 30_000);
});
