/*
 * The forked consumer of `npm run bench:ticks` (config in BENCH_TICKS_CONSUMER; the variants are
 * in --help). Every variant does the same work per message: parse it (the transport, or
 * JSON.parse in raw) and hand the tick to Recorder.record. Sends { ready }, then { done } once
 * every expected message was handled; on { stop } it shuts down (the transport flushes its acks)
 * and sends { consumer-result }.
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import {
  IdempotencyStore,
  RedisStreamsServerOptions,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { failToParent, toParent } from '../shared/child';
import { setupOtel } from './otel-setup';
import { ChildMessage, ConsumerConfig, ConsumerResult, ParentMessage, Tick } from './protocol';
import { Recorder } from './recorder';

const send = (msg: ChildMessage) => toParent(msg);
/** Stops the consumer; the transport's metrics() when there is a transport. */
type Stop = () => Promise<ConsumerResult['server'] | undefined>;

async function startTransport(cfg: ConsumerConfig, recorder: Recorder): Promise<Stop> {
  const batch = !['per-message', 'batch', 'batch-idem-redis'].includes(cfg.variant);
  @Controller()
  class TicksController {
    @StreamEventPattern(cfg.stream, { batch })
    onTicks(@Payload() ticks: Tick | Tick[]): void {
      if (!Array.isArray(ticks)) return recorder.record(ticks);
      for (let i = 0; i < ticks.length; i++) recorder.record(ticks[i]);
    }
  }
  @Module({ controllers: [TicksController] })
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
    const { delivered, batches, failed, duplicatesSkipped, inProgressSkipped } = server.metrics();
    return { delivered, batches, failed, duplicatesSkipped, inProgressSkipped };
  };
}

/** raw: XREADGROUP COUNT n BLOCK 100 + one XACK per batch on one connection; raw-idem adds the IdempotencyStore. */
async function startRaw(cfg: ConsumerConfig, recorder: Recorder): Promise<Stop> {
  const redis = new Redis(cfg.redisUrl, { protocol: 2, maxRetriesPerRequest: null } as never);
  // raw-idem: the store (L1 + L2) on a second connection, as the transport has it: no transport, no Nest.
  const l2 = cfg.variant === 'raw-idem' ? new Redis(cfg.redisUrl, { protocol: 2 } as never) : null;
  const store = l2 ? new IdempotencyStore({ redis: l2, keyPrefix: cfg.idempotencyPrefix }) : null;
  await redis.call('XGROUP', 'CREATE', cfg.stream, cfg.group, '0', 'MKSTREAM').catch((err) => {
    if (!String(err).includes('BUSYGROUP')) throw err;
  });
  let closing = false;
  let lastAck: Promise<unknown> = Promise.resolve();
  const args = ['GROUP', cfg.group, 'raw', 'COUNT', cfg.readCount, 'BLOCK', 100];
  const scope = `${cfg.group}:${cfg.stream}`;
  const loop = (async () => {
    while (!closing) {
      const reply = (await redis.call('XREADGROUP', ...args, 'STREAMS', cfg.stream, '>')) as
        [string, [string, string[]][]][] | null;
      for (const [stream, entries] of reply ?? []) {
        const ids = entries.map(([id]) => id);
        // The transport's default key: the entry (stream and id), one owner at a time.
        const owned =
          store &&
          (await store.beginOwned(
            scope,
            ids.map((id) => ({ id, deliveries: 1 })),
          ));
        const states = owned ? owned.states : null;
        const done: string[] = [];
        for (let i = 0; i < entries.length; i++) {
          if (states && states[i] !== 'acquired') continue;
          recorder.record(JSON.parse(entries[i][1][1]) as Tick);
          done.push(ids[i]);
        }
        if (store) await store.finishOwned(scope, done);
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
  const session = file ? new Session() : undefined;
  session?.connect();
  session?.post('Profiler.enable');
  session?.post('Profiler.setSamplingInterval', { interval: 500 });
  let started = false;
  let stopped: Promise<void> | undefined;
  return {
    start: () => {
      started = !!session;
      session?.post('Profiler.start');
    },
    stop: () =>
      (stopped ??= !started
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) =>
            session!.post('Profiler.stop', (err, res) => {
              if (err) return reject(err);
              writeFileSync(file!, JSON.stringify(res.profile));
              session!.disconnect();
              resolve();
            }),
          )),
  };
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.BENCH_TICKS_CONSUMER!) as ConsumerConfig;
  const otel = setupOtel(cfg.otel);
  const profiler = windowProfiler(cfg.cpuProfile);
  const onDone = () => {
    void profiler.stop().catch(() => undefined);
    send({ type: 'done' });
  };
  const recorder = new Recorder(cfg.warmup, cfg.expected, cfg.rssEveryMs, onDone, profiler.start);
  const stop = await (cfg.variant.startsWith('raw') ? startRaw : startTransport)(cfg, recorder);
  process.on('message', (msg: ParentMessage) => {
    if (msg.type !== 'stop') return;
    Promise.all([stop().then(async (server) => (await otel.finish(), server)), profiler.stop()])
      .then(
        ([server]) => send({ type: 'consumer-result', result: { ...recorder.result(), server } }),
        (err: unknown) => send({ type: 'error', error: String(err) }),
      )
      .finally(() => process.disconnect());
  });
  // The parent is gone (killed, crashed): do not linger.
  process.once('disconnect', () => setTimeout(() => process.exit(1), 2000).unref());
  send({ type: 'ready' });
}

main().catch(failToParent);
