import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  RedisStreamsContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  randomPrefix,
  REDIS_URL,
  sleep,
  startMicroservice,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('shutdown');
const STREAM = `${prefix}ticks`;
const GROUP = 'g';

const handled: string[] = [];
let started = 0;

@Controller()
class SlowController {
  @StreamEventPattern(STREAM)
  async handle(@Payload() _tick: unknown, @Ctx() ctx: RedisStreamsContext) {
    started++;
    await sleep(Math.floor(Math.random() * 15));
    handled.push(ctx.id);
  }
}

const options = {
  connection: REDIS_URL,
  group: GROUP,
  read: { count: 100, blockMs: 50 },
  ack: { batchSize: 200, intervalMs: 1_000 }, // acks pile up: close() must flush them
  claim: { minIdleMs: 60_000, intervalMs: 60_000 },
  concurrency: 50,
  shutdownTimeoutMs: 5_000,
};

describe('app.close() during load', () => {
  let redis: Redis;
  let client: ClientRedisStreams;
  let app: INestMicroservice | undefined;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    client = new ClientRedisStreams({ connection: REDIS_URL });
    await client.connect();
  });

  afterAll(async () => {
    await app?.close();
    await client.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('stops reading, lets running handlers finish, flushes every ack: nothing handled is left pending, nothing is lost', async () => {
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [SlowController] },
      { ...options, consumer: 'first' },
    ));

    // a producer that keeps writing while the app closes
    const produced: string[] = [];
    let producing = true;
    const producer = (async () => {
      let n = 0;
      while (producing) {
        const batch = await Promise.all(
          Array.from({ length: 20 }, () => lastValueFrom(client.emit(STREAM, { n: n++ }))),
        );
        produced.push(...(batch as string[]));
        await sleep(2);
      }
    })();

    await waitFor('300 handled', () => handled.length >= 300, 20_000);
    expect(server.pendingAcks).toBeGreaterThan(0); // acks are waiting in the batcher
    const t0 = Date.now();
    await app.close();
    app = undefined;
    const closeMs = Date.now() - t0;
    const handledBeforeClose = new Set(handled);
    expect(started).toBe(handled.length); // every handler that started, finished
    expect(server.inFlightCount).toBe(0);
    expect(server.pendingAcks).toBe(0);
    expect(closeMs).toBeLessThan(options.shutdownTimeoutMs + 2_000);
    // every message handled before close is acked: nothing of this group is pending
    expect(await pendingCount(redis, STREAM, GROUP)).toBe(0);

    await sleep(50);
    producing = false;
    await producer;

    // a new instance picks up the rest; in the end every message was handled exactly once
    ({ app } = await startMicroservice(
      { controllers: [SlowController] },
      { ...options, consumer: 'second' },
    ));
    await waitFor(
      'every produced message handled',
      () => handled.length >= produced.length,
      20_000,
    );
    await waitFor('nothing pending', async () => (await pendingCount(redis, STREAM, GROUP)) === 0);
    expect(handled.length).toBe(produced.length);
    expect(new Set(handled).size).toBe(produced.length);
    expect([...handled].sort()).toEqual([...produced].sort());
    expect(handledBeforeClose.size).toBeLessThan(produced.length); // close really happened mid-stream
  }, 60_000);
});
