import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import {
  RedisStreamsContext,
  RedisStreamsModule,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  readAll,
  REDIS_URL,
  startMicroservice,
  waitFor,
} from './support/helpers';

jest.setTimeout(60_000);

const prefix = randomPrefix('retry-backoff');
const SCHEDULE = `${prefix}schedule`;
const FLOWING = `${prefix}flowing`;
const GROUP = 'g';

// initialMs * factor^(delivery - 1), capped at maxMs, no jitter: 300, 600, 1200, 1500.
const RETRY = { initialMs: 300, factor: 2, maxMs: 1500, jitter: 0 };
const MAX_DELIVERIES = 5;
const DELAYS = [300, 600, 1200, 1500];
const SUM_OF_DELAYS = DELAYS.reduce((a, b) => a + b, 0);
// Far above every retry delay: a retry that waited for the claim loop would be obvious.
const MIN_IDLE_MS = 20_000;
/** Upward slack of a timer on a loaded machine. */
const SLACK_MS = 1500;

interface Tick {
  n: number;
  poison?: boolean;
}
/** Per stream and n: [Date.now(), deliveries] of every attempt. */
const attempts = new Map<string, [number, number][]>();
function attempt(stream: string, tick: Tick, ctx: RedisStreamsContext): void {
  const key = `${stream}#${tick.n}`;
  attempts.set(key, [...(attempts.get(key) ?? []), [Date.now(), ctx.deliveries]]);
}
const attemptsOf = (stream: string, n: number) => attempts.get(`${stream}#${n}`) ?? [];

@Controller()
class TicksController {
  @StreamEventPattern(SCHEDULE)
  onSchedule(@Payload() tick: Tick, @Ctx() ctx: RedisStreamsContext) {
    attempt(SCHEDULE, tick, ctx);
    if (tick.poison) throw new Error(`tick ${tick.n} is poison`);
  }

  @StreamEventPattern(FLOWING)
  onFlowing(@Payload() tick: Tick, @Ctx() ctx: RedisStreamsContext) {
    attempt(FLOWING, tick, ctx);
    if (tick.poison) throw new Error(`tick ${tick.n} is poison`);
  }
}

describe('retries with exponential backoff (XCLAIM by the failing consumer)', () => {
  let redis: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app, server } = await startMicroservice(
      { imports: [RedisStreamsModule.forRoot()], controllers: [TicksController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        claim: { minIdleMs: MIN_IDLE_MS, intervalMs: 100 },
        retry: RETRY,
        deadLetter: { maxDeliveries: MAX_DELIVERIES },
      },
    ));
  });

  afterAll(async () => {
    await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('attempt times follow the schedule, and the poison message is dead-lettered after maxDeliveries within about the sum of the delays', async () => {
    const [poisonId] = await produce(redis, SCHEDULE, [{ n: 0, poison: true }]);
    await waitFor(
      'the poison message dead-lettered',
      async () => (await redis.xlen(`${SCHEDULE}:dlq`)) === 1,
      SUM_OF_DELAYS + 20_000,
    );
    const deadLetteredAt = Date.now();
    const seen = attemptsOf(SCHEDULE, 0);
    expect(seen.map(([, deliveries]) => deliveries)).toEqual([1, 2, 3, 4, 5]);
    const gaps = seen.slice(1).map(([at], i) => at - seen[i][0]);
    gaps.forEach((gap, i) => {
      expect(gap).toBeGreaterThanOrEqual(DELAYS[i]);
      expect(gap).toBeLessThan(DELAYS[i] + SLACK_MS);
    });
    // the whole way to the dead-letter stream: the sum of the delays, not MIN_IDLE_MS per attempt
    const total = deadLetteredAt - seen[0][0];
    expect(total).toBeGreaterThanOrEqual(SUM_OF_DELAYS);
    expect(total).toBeLessThan(SUM_OF_DELAYS + 3 * SLACK_MS);
    expect(total).toBeLessThan(MIN_IDLE_MS);

    const [dead] = await readAll(redis, `${SCHEDULE}:dlq`);
    expect(dead.fields).toMatchObject({
      id: poisonId,
      stream: SCHEDULE,
      reason: 'handler-failed',
      deliveries: String(MAX_DELIVERIES),
      error: 'tick 0 is poison',
    });
    await waitFor(
      'nothing pending',
      async () => (await pendingCount(redis, SCHEDULE, GROUP)) === 0,
    );
    expect(server.waitingRetries).toBe(0);
  });

  it('other messages keep flowing while a failing one waits for its retries', async () => {
    const before = server.metrics();
    await produce(redis, FLOWING, [{ n: 0, poison: true }]);
    await waitFor('the first failure', () => attemptsOf(FLOWING, 0).length === 1);
    const firstFailureAt = attemptsOf(FLOWING, 0)[0][0];

    // While it waits, 3 waves of healthy messages: each is handled on its first delivery.
    let n = 1;
    for (let wave = 0; wave < 3; wave++) {
      const from = n;
      await produce(
        redis,
        FLOWING,
        Array.from({ length: 20 }, () => ({ n: n++ })),
      );
      await waitFor(`wave ${wave} handled`, () => {
        for (let i = from; i < n; i++) if (attemptsOf(FLOWING, i).length === 0) return false;
        return true;
      });
    }
    const healthyDoneAt = Math.max(
      ...Array.from({ length: n - 1 }, (_, i) => attemptsOf(FLOWING, i + 1)[0][0]),
    );
    await waitFor(
      'the poison message dead-lettered',
      async () => (await redis.xlen(`${FLOWING}:dlq`)) === 1,
      SUM_OF_DELAYS + 20_000,
    );
    await waitFor('nothing pending', async () => (await pendingCount(redis, FLOWING, GROUP)) === 0);

    const poison = attemptsOf(FLOWING, 0);
    expect(poison.map(([, d]) => d)).toEqual([1, 2, 3, 4, 5]);
    // the healthy messages were all handled before the poison message's last attempt,
    expect(healthyDoneAt).toBeLessThan(poison[poison.length - 1][0]);
    expect(healthyDoneAt).toBeGreaterThanOrEqual(firstFailureAt);
    // each once, on its first delivery
    for (let i = 1; i < n; i++)
      expect([i, attemptsOf(FLOWING, i).map(([, d]) => d)]).toEqual([i, [1]]);
    const after = server.metrics();
    expect(after.succeeded - before.succeeded).toBe(n - 1);
    expect(after.failed - before.failed).toBe(MAX_DELIVERIES);
    expect(after.retried - before.retried).toBe(MAX_DELIVERIES - 1);
    expect(after.deadLettered - before.deadLettered).toBe(1);
  });
});
