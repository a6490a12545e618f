import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { Redis } from 'ioredis';
import {
  Idempotent,
  RedisStreamsContext,
  RedisStreamsModule,
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

const prefix = randomPrefix('kill');
const STREAM = `${prefix}ticks`;
const GROUP = 'candles';
const EFFECTS = `${prefix}effects`;
const IDEM_PREFIX = `${prefix}idem:`;
const N = 200;
const STUCK_AT = 100;

const seenByB: { n: number; deliveries: number }[] = [];
let effectsClient: Redis;

@Controller()
class SurvivorController {
  @StreamEventPattern(STREAM)
  @Idempotent({ ttlMs: 60_000, lockMs: 500 })
  async handle(@Payload() data: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    seenByB.push({ n: data.n, deliveries: ctx.deliveries });
    await effectsClient.hincrby(EFFECTS, String(data.n), 1);
  }
}

describe('kill -9 of a consumer process: a second consumer claims its pending messages (idempotency L2)', () => {
  let redis: Redis;
  let worker: ChildProcess | undefined;
  let app: INestMicroservice | undefined;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    effectsClient = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    if (worker && worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effectsClient.quit();
  });

  it('every one of the N messages is handled, and each side effect happens exactly once', async () => {
    const ids = await produce(
      redis,
      STREAM,
      Array.from({ length: N }, (_, n) => ({ n })),
    );

    // Consumer A, in its own process, handles messages 0..99 (side effects done, acks still batched), then hangs on #100.
    const handledByA: number[] = [];
    let stuck: { stuck: number; id: string } | undefined;
    worker = fork(path.join(__dirname, 'support/consumer-worker.ts'), [], {
      execArgv: ['--require', path.join(__dirname, '..', '..', '..', 'scripts', 'register-ts.js')],
      env: {
        ...process.env,
        REDIS_URL,
        STREAM,
        GROUP,
        CONSUMER: 'A',
        EFFECTS,
        IDEM_PREFIX,
        STUCK_AT: String(STUCK_AT),
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      worker!.once('exit', (_code, signal) => resolve(signal)),
    );
    worker.on('message', (m: any) => {
      if (typeof m.handled === 'number') handledByA.push(m.handled);
      if (typeof m.stuck === 'number') stuck = m;
    });
    await waitFor('consumer A stuck on its message', () => stuck !== undefined, 30_000);
    worker.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');

    expect(handledByA).toEqual(Array.from({ length: STUCK_AT }, (_, n) => n));
    // A died with its batch of acks unsent: all of its messages are still pending
    expect(await pendingIds(redis, STREAM, GROUP)).toEqual(ids.slice(0, STUCK_AT + 1));

    // Consumer B takes over.
    ({ app } = await startMicroservice(
      {
        imports: [RedisStreamsModule.forRoot()],
        controllers: [SurvivorController],
      },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'B',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        claim: { minIdleMs: 200, intervalMs: 50, count: 500 },
        deadLetter: { maxDeliveries: 20 },
        idempotency: { store: 'redis', keyPrefix: IDEM_PREFIX },
      },
    ));
    await waitFor(
      'every side effect done and nothing pending',
      async () =>
        (await redis.hlen(EFFECTS)) === N && (await pendingCount(redis, STREAM, GROUP)) === 0,
      20_000,
    );

    const effects = await redis.hgetall(EFFECTS);
    for (let n = 0; n < N; n++) expect([n, effects[String(n)]]).toEqual([n, '1']);
    // B ran the stuck message after claiming it (delivery > 1) and everything A never read (delivery 1);
    // A's finished messages were claimed and skipped by the idempotency check.
    const ranByB = [...new Set(seenByB.map((s) => s.n))].sort((a, b) => a - b);
    expect(ranByB).toEqual(Array.from({ length: N - STUCK_AT }, (_, i) => STUCK_AT + i));
    expect(seenByB.find((s) => s.n === STUCK_AT)!.deliveries).toBeGreaterThan(1);
    expect(seenByB.filter((s) => s.n > STUCK_AT).every((s) => s.deliveries === 1)).toBe(true);
    expect(await redis.xlen(`${STREAM}:dlq`)).toBe(0);
  }, 60_000);
});
