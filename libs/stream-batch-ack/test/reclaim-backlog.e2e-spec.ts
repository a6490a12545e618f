import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { RedisStreamsContext, StreamEventPattern } from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  REDIS_URL,
  startMicroservice,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('reclaim-backlog');
const STREAM = `${prefix}orders`;
const GROUP = 'g';
const ENTRIES = 3000;
const CLAIM_INTERVAL_MS = 10_000;
const handled = new Map<string, number>();

@Controller()
class OrdersController {
  @StreamEventPattern(STREAM)
  handle(@Payload() _data: unknown, @Ctx() ctx: RedisStreamsContext) {
    handled.set(ctx.id, (handled.get(ctx.id) ?? 0) + 1);
  }
}

/*
 * A consumer died holding 3000 entries. The claim loop claims 500 per page every 10 s: one page
 * per interval would take 6 intervals (60 s); claiming the next page as soon as there is room
 * takes the first interval plus about as long as handling the entries (well under a second, so
 * even a machine many times slower stays far below a second interval).
 */
describe('a dead consumer backlog is claimed page after page, not one page per interval', () => {
  jest.setTimeout(90_000);
  let redis: Redis;
  let app: INestMicroservice | undefined;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    await redis.xgroup('CREATE', STREAM, GROUP, '$', 'MKSTREAM');
    await produce(
      redis,
      STREAM,
      Array.from({ length: ENTRIES }, (_, i) => ({ n: i })),
    );
    await redis.xreadgroup('GROUP', GROUP, 'dead', 'COUNT', ENTRIES, 'STREAMS', STREAM, '>');
    expect(await pendingCount(redis, STREAM, GROUP)).toBe(ENTRIES);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('3000 pending entries of a dead consumer: all handled once, in about one claim interval (the first scan) plus the handling', async () => {
    await new Promise((r) => setTimeout(r, 250)); // idle longer than claim.minIdleMs
    const started = Date.now();
    ({ app } = await startMicroservice(
      { controllers: [OrdersController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'alive',
        read: { count: 100, blockMs: 50 },
        ack: { batchSize: 500, intervalMs: 20 },
        claim: { minIdleMs: 200, intervalMs: CLAIM_INTERVAL_MS, count: 500 },
        retry: { maxMs: 50 },
        concurrency: 600,
      },
    ));
    await waitFor('every entry handled', () => handled.size === ENTRIES, 6 * CLAIM_INTERVAL_MS);
    const took = Date.now() - started;
    expect(took).toBeLessThan(2 * CLAIM_INTERVAL_MS);
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
    await waitFor('all acknowledged', async () => (await pendingCount(redis, STREAM, GROUP)) === 0);
  });
});
