/*
 * A consumer process for the kill -9 test. Run with: node --require scripts/register-ts.js consumer-worker.ts
 * Env: REDIS_URL, STREAM, GROUP, CONSUMER, EFFECTS (hash of side effects), IDEM_PREFIX, STUCK_AT (n whose handler never ends),
 * HANG_AFTER (n whose handler never ends after its side effect: the kill lands between the effect and the done mark),
 * PARTITIONS (optional: STREAM is a logical stream with this many partitions), ATOMIC_EFFECT ('1': the side
 * effect and its idempotency done mark are one script, IDEMPOTENT_EFFECT_LUA).
 */
import { Controller } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, Payload } from '@nestjs/microservices';
import { Module } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  IDEMPOTENT_EFFECT_LUA,
  Idempotent,
  RedisStreamsContext,
  RedisStreamsModule,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const REDIS_URL = env('REDIS_URL');
const STREAM = env('STREAM');
const stuckAt = Number(process.env.STUCK_AT ?? -1);
const hangAfter = Number(process.env.HANG_AFTER ?? -1);
const partitions = process.env.PARTITIONS
  ? { [STREAM]: Number(process.env.PARTITIONS) }
  : undefined;
const effects = new Redis(REDIS_URL);
const atomic = process.env.ATOMIC_EFFECT === '1';
effects.defineCommand('applyEffect', {
  numberOfKeys: 2,
  lua: `${IDEMPOTENT_EFFECT_LUA}
    if sba_take(KEYS[1], ARGV[1], ARGV[2]) then redis.call('HINCRBY', KEYS[2], ARGV[3], 1) end
    return 1`,
});
type WithEffect = Redis & { applyEffect(...args: (string | number)[]): Promise<number> };

@Controller()
class WorkerController {
  @StreamEventPattern(STREAM)
  @Idempotent({ ttlMs: 60_000, lockMs: 500 })
  async handle(@Payload() data: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    if (data.n === stuckAt) {
      process.send?.({ stuck: data.n, id: ctx.id, stream: ctx.stream });
      await new Promise(() => undefined); // never ends: the test kills us here
    }
    if (atomic) {
      const { record, token, ttlMs } = ctx.idempotency!;
      await (effects as WithEffect).applyEffect(record, env('EFFECTS'), token, ttlMs, data.n);
    } else await effects.hincrby(env('EFFECTS'), String(data.n), 1);
    process.send?.({ handled: data.n });
    if (data.n === hangAfter) {
      process.send?.({ stuck: data.n, id: ctx.id, stream: ctx.stream });
      await new Promise(() => undefined); // never ends: the test kills us here
    }
  }
}

@Module({
  imports: [RedisStreamsModule.forRoot()],
  controllers: [WorkerController],
})
class WorkerModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createMicroservice(WorkerModule, {
    logger: false,
    strategy: new ServerRedisStreams({
      connection: REDIS_URL,
      group: env('GROUP'),
      consumer: env('CONSUMER'),
      concurrency: 1,
      read: { count: 10, blockMs: 50 },
      ack: { batchSize: 10_000, intervalMs: 60_000 }, // nothing is acked before the kill
      claim: { minIdleMs: 60_000, intervalMs: 60_000 },
      idempotency: { store: 'redis', keyPrefix: env('IDEM_PREFIX') },
      partitions,
    }),
  });
  await app.listen();
  process.send?.({ ready: true });
}

void main();
