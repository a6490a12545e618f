/*
 * A consumer process for the exactly-once test (idempotency.e2e-spec.ts): a batch handler that
 * applies each tick's effect atomically with its idempotency record (applyBatchEffects).
 * Run with: node --require scripts/register-ts.js batch-effect-worker.ts
 * Env: REDIS_URL, STREAM, GROUP, CONSUMER, EFFECTS (hash of effects), IDEM_PREFIX, LOCK_MS,
 * MIN_IDLE_MS, DELAY_MS (before each batch's effect), AFTER_MS (after it: the handler has applied
 * the effects and not returned yet), CONCURRENCY, ACK_INTERVAL_MS, ACK_BATCH_SIZE.
 * IPC out: { ready }, { applied: n[] } after each batch, { metrics } before a graceful exit.
 * IPC in: 'close' (close the app, send the metrics, exit 0).
 */
import { Controller, INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import {
  Idempotent,
  RedisStreamsBatchContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { applyBatchEffects } from './batch-effect';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const REDIS_URL = env('REDIS_URL');
const STREAM = env('STREAM');
const EFFECTS = env('EFFECTS');
const DELAY_MS = Number(process.env.DELAY_MS ?? 0);
const AFTER_MS = Number(process.env.AFTER_MS ?? 0);
const effects = new Redis(REDIS_URL);

@Controller()
class BatchEffectController {
  @StreamEventPattern(STREAM, { batch: true })
  @Idempotent({ key: (tick: { n: number }) => `n:${tick.n}` })
  async handle(@Payload() ticks: { n: number }[], @Ctx() ctx: RedisStreamsBatchContext) {
    if (DELAY_MS > 0) await new Promise((r) => setTimeout(r, DELAY_MS));
    const applied = await applyBatchEffects(effects, EFFECTS, ticks, ctx);
    process.send?.({ applied });
    if (AFTER_MS > 0) await new Promise((r) => setTimeout(r, AFTER_MS));
  }
}

@Module({ controllers: [BatchEffectController] })
class WorkerModule {}

async function main(): Promise<void> {
  const server = new ServerRedisStreams({
    connection: REDIS_URL,
    group: env('GROUP'),
    consumer: env('CONSUMER'),
    concurrency: Number(process.env.CONCURRENCY ?? 50),
    read: { count: 50, blockMs: 50 },
    ack: {
      batchSize: Number(process.env.ACK_BATCH_SIZE ?? 200),
      intervalMs: Number(process.env.ACK_INTERVAL_MS ?? 50),
    },
    claim: { minIdleMs: Number(env('MIN_IDLE_MS')), intervalMs: 100, count: 500 },
    deadLetter: { maxDeliveries: 20 },
    idempotency: {
      store: 'redis',
      keyPrefix: env('IDEM_PREFIX'),
      lockMs: Number(env('LOCK_MS')),
    },
  });
  const app: INestMicroservice = await NestFactory.createMicroservice(WorkerModule, {
    logger: false,
    strategy: server,
  });
  await app.listen();
  process.on('message', (m) => {
    if (m !== 'close') return;
    void app.close().then(async () => {
      await effects.quit();
      process.send?.({ metrics: server.metrics() }, () => process.exit(0));
    });
  });
  process.send?.({ ready: true });
}

void main();
