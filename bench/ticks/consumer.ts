/*
 * The forked consumer process of `npm run bench:ticks`. Config in BENCH_TICKS_CONSUMER (JSON).
 * Every variant does the same work per message: parse it (the transport, or JSON.parse in raw)
 * and hand the tick to Recorder.record (latency and sequence number).
 *   per-message, batch: a Nest microservice on ServerRedisStreams with one trivial per-message
 *                       @EventPattern handler; per-message is the same transport with
 *                       ack.batchSize 1 and ack.intervalMs 0 (one XACK per message).
 *   batch-idem-redis:   batch + idempotency { store: 'redis' } (the per-message handler).
 *   batch-handler:      the same microservice with a batch handler,
 *                       @EventPattern(stream, { batch: true }) taking Tick[] and the batch context.
 *   idem-memory:        batch-handler + the server option idempotency { store: 'memory' }.
 *   idem-redis:         batch-handler + idempotency { store: 'redis' } (L1 + L2 on the server's
 *                       command connection; records under cfg.idempotencyPrefix).
 *   raw:                no framework: XREADGROUP COUNT n BLOCK 100 + one XACK per batch, on one
 *                       ioredis connection (the ceiling).
 *   raw-idem:           raw + the library's IdempotencyStore (L1 + Redis L2, a second connection)
 *                       for the default key: beginOwned(the batch), record, finishOwned, XACK. A
 *                       diagnostic: what idempotency costs without the transport and Nest.
 * Sends { ready }, then { done } once every expected message was handled; on { stop } it shuts
 * down (the transport flushes its acks) and sends { consumer-result }.
 * With cfg.cpuProfile, the V8 CPU profile of the measured window (first to last measured message)
 * is written there.
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import {
  IdempotencyStore,
  RedisStreamsBatchContext,
  RedisStreamsServerOptions,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { ChildMessage, ConsumerConfig, ConsumerResult, ParentMessage, Tick } from './protocol';
import { Recorder } from './recorder';
import { setupOtel } from './otel-setup';
import { failToParent } from '../shared/child';

const send = (msg: ChildMessage) => process.send!(msg);

function perMessageController(stream: string, recorder: Recorder) {
  @Controller()
  class TicksController {
    @StreamEventPattern(stream)
    onTick(@Payload() tick: Tick): void {
      recorder.record(tick);
    }
  }
  return TicksController;
}

function batchController(stream: string, recorder: Recorder) {
  @Controller()
  class TicksBatchController {
    @StreamEventPattern(stream, { batch: true })
    onTicks(@Payload() ticks: Tick[], @Ctx() _ctx: RedisStreamsBatchContext): void {
      for (let i = 0; i < ticks.length; i++) recorder.record(ticks[i]);
    }
  }
  return TicksBatchController;
}

type Stop = () => Promise<ConsumerResult['server'] | undefined>;

async function startTransport(cfg: ConsumerConfig, recorder: Recorder): Promise<Stop> {
  const batchHandler = !['per-message', 'batch', 'batch-idem-redis'].includes(cfg.variant);
  const controller = batchHandler
    ? batchController(cfg.stream, recorder)
    : perMessageController(cfg.stream, recorder);
  @Module({ controllers: [controller] })
  class TicksModule {}
  const options: RedisStreamsServerOptions = {
    connection: cfg.redisUrl,
    group: cfg.group,
    consumer: `bench-${process.pid}`,
    read: { count: cfg.readCount, blockMs: 100 },
    ack:
      cfg.variant === 'per-message'
        ? { batchSize: 1, intervalMs: 0 }
        : { batchSize: cfg.batchSize, intervalMs: cfg.intervalMs },
    concurrency: cfg.concurrency,
  };
  // The library's defaults otherwise (ttlMs 60 s, lockMs 30 s, L1 maxSize 100,000).
  if (cfg.variant === 'idem-memory') options.idempotency = { store: 'memory' };
  if (cfg.variant === 'idem-redis' || cfg.variant === 'batch-idem-redis')
    options.idempotency = { store: 'redis', keyPrefix: cfg.idempotencyPrefix };
  const server = new ServerRedisStreams(options);
  const app = await NestFactory.createMicroservice(TicksModule, {
    strategy: server,
    logger: ['error', 'warn'],
  });
  await app.listen();
  return async () => {
    await app.close();
    const m = server.metrics();
    return {
      delivered: m.delivered,
      succeeded: m.succeeded,
      failed: m.failed,
      batches: m.batches,
      duplicatesSkipped: m.duplicatesSkipped,
      inProgressSkipped: m.inProgressSkipped,
    };
  };
}

type Entry = [string, string[]];

async function startRaw(cfg: ConsumerConfig, recorder: Recorder): Promise<Stop> {
  const redis = new Redis(cfg.redisUrl, { protocol: 2, maxRetriesPerRequest: null } as never);
  // raw-idem: the library's IdempotencyStore (L1 + L2) on a second connection, as the transport
  // has it, around the same loop: no transport, no Nest.
  const l2 = cfg.variant === 'raw-idem' ? new Redis(cfg.redisUrl, { protocol: 2 } as never) : null;
  const store = l2 ? new IdempotencyStore({ redis: l2, keyPrefix: cfg.idempotencyPrefix }) : null;
  try {
    await redis.call('XGROUP', 'CREATE', cfg.stream, cfg.group, '0', 'MKSTREAM');
  } catch (err) {
    if (!String(err).includes('BUSYGROUP')) throw err;
  }
  let closing = false;
  let lastAck: Promise<unknown> = Promise.resolve();
  const read = () =>
    redis.call(
      'XREADGROUP',
      'GROUP',
      cfg.group,
      'raw',
      'COUNT',
      cfg.readCount,
      'BLOCK',
      100,
      'STREAMS',
      cfg.stream,
      '>',
    ) as Promise<[string, Entry[]][] | null>;
  const scope = `${cfg.group}:${cfg.stream}`;
  const loop = (async () => {
    while (!closing) {
      const reply = await read();
      for (const [stream, entries] of reply ?? []) {
        const ids = new Array<string>(entries.length);
        if (store) {
          // The transport's default key: the entry (stream and id), one owner at a time.
          const owned = entries.map(([id]) => ({ id, deliveries: 1 }));
          const { states } = await store.beginOwned(scope, owned);
          const done: string[] = [];
          for (let i = 0; i < entries.length; i++) {
            const [id, fields] = entries[i];
            ids[i] = id;
            if (states[i] !== 'acquired') continue;
            recorder.record(JSON.parse(fields[1]) as Tick);
            done.push(id);
          }
          await store.finishOwned(scope, done);
        } else {
          for (let i = 0; i < entries.length; i++) {
            const [id, fields] = entries[i];
            ids[i] = id;
            recorder.record(JSON.parse(fields[1]) as Tick);
          }
        }
        // One XACK per batch, not awaited: it goes out before the next XREADGROUP on the same connection.
        lastAck = redis.call('XACK', stream, cfg.group, ...ids);
      }
    }
  })();
  return async () => {
    closing = true;
    await loop;
    await lastAck;
    await Promise.all([redis.quit(), l2?.quit()]);
    return undefined;
  };
}

/** A CPU profile of the measured window, through the inspector (sampling every 500 µs). */
function windowProfiler(file: string | undefined) {
  if (!file) return { start: () => undefined, stop: () => Promise.resolve() };
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 500 });
  let stopped: Promise<void> | null = null;
  let started = false;
  return {
    start: () => {
      started = true;
      session.post('Profiler.start');
    },
    stop: () =>
      (stopped ??= !started
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) =>
            session.post('Profiler.stop', (err, res) => {
              if (err) return reject(err);
              writeFileSync(file, JSON.stringify(res.profile));
              session.disconnect();
              resolve();
            }),
          )),
  };
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.BENCH_TICKS_CONSUMER!) as ConsumerConfig;
  const otel = setupOtel(cfg.otel);
  const profiler = windowProfiler(cfg.cpuProfile);
  const recorder = new Recorder(
    cfg.warmup,
    cfg.expected,
    cfg.rssEveryMs,
    () => {
      void profiler.stop().catch(() => undefined);
      send({ type: 'done' });
    },
    () => profiler.start(),
  );
  const stop = cfg.variant.startsWith('raw')
    ? await startRaw(cfg, recorder)
    : await startTransport(cfg, recorder);
  process.on('message', (msg: ParentMessage) => {
    if (msg.type !== 'stop') return;
    Promise.all([
      stop().then(async (server) => (await otel.finish(), server)),
      profiler.stop(),
    ]).then(
      ([server]) => {
        send({ type: 'consumer-result', result: { ...recorder.result(), server } });
        process.disconnect();
      },
      (err: unknown) => {
        send({ type: 'error', error: String(err) });
        process.disconnect();
      },
    );
  });
  // The parent is gone (killed, crashed): do not linger.
  process.once('disconnect', () => setTimeout(() => process.exit(1), 2000).unref());
  send({ type: 'ready' });
}

main().catch(failToParent);
