import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  IDEMPOTENT_EFFECT_LUA,
  Idempotent,
  partitionOf,
  partitionStream,
  partitionStreams,
  RedisStreamsContext,
  RedisStreamsModule,
  RedisStreamsRecord,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  randomPrefix,
  REDIS_URL,
  startMicroservice,
  waitFor,
} from './support/helpers';

const prefix = randomPrefix('partitions-kill');
const STREAM = `${prefix}ticks`; // logical
const N_PARTITIONS = 4;
const GROUP = 'candles';
const EFFECTS = `${prefix}effects`;
const IDEM_PREFIX = `${prefix}idem:`;
const N = 200;
const STUCK_AT = 100;
const keyOf = (n: number) => `SYM${n % 8}`;

const seenByB: { n: number; deliveries: number; partition?: number }[] = [];
let effectsClient: Redis & { applyEffect(...args: (string | number)[]): Promise<number> };

// Consumer A reads all partitions with one XREADGROUP, so it runs entries of several partitions at
// once, and is killed while some may be between their side effect and their done mark: the side
// effect is made atomic with the done mark (IDEMPOTENT_EFFECT_LUA), so each happens exactly once.
const APPLY_EFFECT_LUA = `${IDEMPOTENT_EFFECT_LUA}
if sba_take(KEYS[1], ARGV[1], ARGV[2]) then redis.call('HINCRBY', KEYS[2], ARGV[3], 1) end
return 1`;

@Controller()
class SurvivorController {
  @StreamEventPattern(STREAM)
  @Idempotent({ ttlMs: 60_000, lockMs: 500 })
  async handle(@Payload() data: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    seenByB.push({ n: data.n, deliveries: ctx.deliveries, partition: ctx.partition });
    const { record, token, ttlMs } = ctx.idempotency!;
    await effectsClient.applyEffect(record, EFFECTS, token, ttlMs, data.n);
  }
}

/** XPENDING summary: [count, min, max, [[consumer, count], ...]] */
async function pendingByConsumer(redis: Redis, stream: string): Promise<Record<string, number>> {
  const [, , , consumers] = (await redis.call('XPENDING', stream, GROUP)) as [
    number,
    string,
    string,
    [string, string][] | null,
  ];
  return Object.fromEntries((consumers ?? []).map(([c, n]) => [c, Number(n)]));
}

describe('kill -9 of a consumer of a partitioned stream: the other consumer claims its pending entries on every partition', () => {
  let redis: Redis;
  let worker: ChildProcess | undefined;
  let app: INestMicroservice | undefined;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    effectsClient = new Redis(REDIS_URL) as typeof effectsClient;
    effectsClient.defineCommand('applyEffect', { numberOfKeys: 2, lua: APPLY_EFFECT_LUA });
  });

  afterAll(async () => {
    if (worker && worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effectsClient.quit();
  });

  it('every message is handled, each side effect exactly once (idempotency L2), nothing pending or dead-lettered', async () => {
    const client = new ClientRedisStreams({
      connection: REDIS_URL,
      partitions: { [STREAM]: N_PARTITIONS },
    });
    try {
      for (let n = 0; n < N; n++)
        await firstValueFrom(
          client.emit(STREAM, new RedisStreamsRecord({ n }, {}, { partitionKey: keyOf(n) })),
        );
    } finally {
      await client.close();
    }

    // Consumer A, in its own process, reads all partitions, then hangs on #100 with its acks unsent.
    let stuck: { stuck: number; id: string; stream: string } | undefined;
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
        PARTITIONS: String(N_PARTITIONS),
        ATOMIC_EFFECT: '1',
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      worker!.once('exit', (_code, signal) => resolve(signal)),
    );
    worker.on('message', (m: any) => {
      if (typeof m.stuck === 'number') stuck = m;
    });
    await waitFor('consumer A stuck on its message', () => stuck !== undefined, 30_000);
    worker.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    expect(stuck!.stream).toBe(partitionStream(STREAM, partitionOf(keyOf(STUCK_AT), 4), 4));

    // A left entries pending on several partitions.
    const pendingOfA = await Promise.all(
      partitionStreams(STREAM, N_PARTITIONS).map(
        async (s) => (await pendingByConsumer(redis, s)).A ?? 0,
      ),
    );
    expect(pendingOfA.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);

    // Consumer B takes over.
    ({ app } = await startMicroservice(
      { imports: [RedisStreamsModule.forRoot()], controllers: [SurvivorController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'B',
        partitions: { [STREAM]: N_PARTITIONS },
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        claim: { minIdleMs: 200, intervalMs: 50, count: 500 },
        deadLetter: { maxDeliveries: 20 },
        idempotency: { store: 'redis', keyPrefix: IDEM_PREFIX },
      },
    ));
    const streams = partitionStreams(STREAM, N_PARTITIONS);
    await waitFor(
      'every side effect done and nothing pending on any partition',
      async () => {
        if ((await redis.hlen(EFFECTS)) !== N) return false;
        for (const s of streams) if ((await pendingCount(redis, s, GROUP)) !== 0) return false;
        return true;
      },
      30_000,
    );

    const effects = await redis.hgetall(EFFECTS);
    for (let n = 0; n < N; n++) expect([n, effects[String(n)]]).toEqual([n, '1']);
    // B took over A's entries on the partitions, and ran the stuck message (delivery > 1).
    const stuckRun = seenByB.find((s) => s.n === STUCK_AT)!;
    expect(stuckRun.deliveries).toBeGreaterThan(1);
    expect(stuckRun.partition).toBe(partitionOf(keyOf(STUCK_AT), N_PARTITIONS));
    for (const s of seenByB) expect(s.partition).toBe(partitionOf(keyOf(s.n), N_PARTITIONS));
    for (const s of streams) expect(await redis.xlen(`${s}:dlq`)).toBe(0);
  }, 90_000);
});
