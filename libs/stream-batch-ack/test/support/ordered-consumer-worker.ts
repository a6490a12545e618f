/*
 * A consumer process of a partitioned stream with ordering: 'key', for the kill -9 test
 * (ordered-partitions-kill.e2e-spec.ts). Run with: node --require scripts/register-ts.js ordered-consumer-worker.ts
 * Each handler run first appends `key|seq|consumer|deliveries` to the list LOG (one list for all
 * consumers: Redis orders the runs of every process), then applies its effect (HINCRBY EFFECTS
 * key/seq) atomically with its idempotency done mark.
 * Env: REDIS_URL, STREAM (logical), PARTITIONS, GROUP, CONSUMER, LEASE_MS, EFFECTS, LOG, IDEM_PREFIX,
 * STUCK_SEQ (optional: the first message with this seq that this consumer runs never ends),
 * ACK_INTERVAL_MS (default 20; 60000: nothing is acked before a kill).
 * IPC out: { ready }, { event: 'assigned' | 'released' | 'lost', partition, takenOver, reason, at,
 * owned } on every partition event, { stuck: { key, seq, partition } }, { problem }.
 * IPC in: 'close' (close the app and the clients, exit 0).
 */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { RedisStreamsContext, ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { KeyedMessage, orderedController, withEffect } from './ordered-partitions';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is required`);
  return v;
};
const REDIS_URL = env('REDIS_URL');
const STREAM = env('STREAM');
const CONSUMER = env('CONSUMER');
const EFFECTS = env('EFFECTS');
const LOG = env('LOG');
const STUCK_SEQ = process.env.STUCK_SEQ === undefined ? -1 : Number(process.env.STUCK_SEQ);
const ACK_INTERVAL_MS = Number(process.env.ACK_INTERVAL_MS ?? 20);

const send = (message: unknown) => process.send?.(message);
const redis = withEffect(new Redis(REDIS_URL));
const running = new Set<string>();
let stuck = false;

const server = new ServerRedisStreams({
  connection: REDIS_URL,
  group: env('GROUP'),
  consumer: CONSUMER,
  partitions: { [STREAM]: Number(env('PARTITIONS')) },
  ordering: 'key',
  leaseMs: Number(env('LEASE_MS')),
  read: { count: 50, blockMs: 50 },
  ack: { batchSize: 10_000, intervalMs: ACK_INTERVAL_MS },
  idempotency: { store: 'redis', keyPrefix: env('IDEM_PREFIX'), lockMs: 1000 },
});

const Ticks = orderedController(STREAM, async (msg: KeyedMessage, ctx: RedisStreamsContext) => {
  const what = `${msg.key}/${msg.seq} on ${CONSUMER}`;
  const owned = server.ownedPartitions(STREAM);
  if (ctx.partition === undefined || !owned.includes(ctx.partition))
    send({
      problem: `${what} started on partition ${ctx.partition}, not owned (ownedPartitions: [${owned}])`,
    });
  if (running.has(msg.key)) send({ problem: `${what} started while ${msg.key} ran` });
  running.add(msg.key);
  try {
    await redis.rpush(LOG, `${msg.key}|${msg.seq}|${CONSUMER}|${ctx.deliveries}`);
    if (msg.seq === STUCK_SEQ && !stuck) {
      stuck = true;
      send({ stuck: { ...msg, partition: ctx.partition } });
      await new Promise(() => undefined); // never ends: the test kills this process here
    }
    const { record, token, ttlMs } = ctx.idempotency!;
    await redis.applyEffect(record, EFFECTS, token, ttlMs, `${msg.key}/${msg.seq}`);
  } finally {
    running.delete(msg.key);
  }
});

const partitionEvent =
  (event: 'assigned' | 'released' | 'lost') =>
  (e: { stream: string; partition: number; takenOver?: number; reason?: string }) => {
    if (e.stream !== STREAM) return;
    send({
      event,
      partition: e.partition,
      takenOver: e.takenOver,
      reason: e.reason,
      at: Date.now(),
      owned: server.ownedPartitions(STREAM),
    });
  };
server.events.on('redis_streams.partition.assigned', partitionEvent('assigned'));
server.events.on('redis_streams.partition.released', partitionEvent('released'));
server.events.on('redis_streams.partition.lost', partitionEvent('lost'));

@Module({ controllers: [Ticks] })
class WorkerModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createMicroservice(WorkerModule, {
    logger: false,
    strategy: server,
  });
  await app.listen();
  process.on('message', (m) => {
    if (m !== 'close') return;
    void app
      .close()
      .then(() => redis.quit())
      .then(() => process.exit(0));
  });
  send({ ready: true });
}

void main();
