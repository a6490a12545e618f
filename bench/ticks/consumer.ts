/*
 * The forked consumer process of `npm run bench:ticks`. Config in BENCH_TICKS_CONSUMER (JSON).
 *   per-message, batch: a Nest microservice on ServerRedisStreams with one trivial
 *                       @EventPattern handler (records the tick); per-message is the same
 *                       transport with ack.batchSize 1 and ack.intervalMs 0 (one XACK per message).
 *   raw:                no framework: XREADGROUP COUNT n BLOCK 100 + one XACK per batch, on one
 *                       ioredis connection (the ceiling).
 * Sends { ready }, then { done } once every expected message was handled; on { stop } it shuts
 * down (the transport flushes its acks) and sends { consumer-result }.
 */
import 'reflect-metadata';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { ChildMessage, ConsumerConfig, ParentMessage, Tick } from './protocol';
import { Recorder } from './recorder';

const send = (msg: ChildMessage) => process.send!(msg);

function controllerFor(stream: string, recorder: Recorder) {
  @Controller()
  class TicksController {
    @EventPattern(stream)
    onTick(@Payload() tick: Tick): void {
      recorder.record(tick);
    }
  }
  return TicksController;
}

async function startTransport(
  cfg: ConsumerConfig,
  recorder: Recorder,
): Promise<() => Promise<void>> {
  @Module({ controllers: [controllerFor(cfg.stream, recorder)] })
  class TicksModule {}
  const perMessage = cfg.variant === 'per-message';
  const app = await NestFactory.createMicroservice(TicksModule, {
    strategy: new ServerRedisStreams({
      connection: cfg.redisUrl,
      group: cfg.group,
      consumer: `bench-${process.pid}`,
      read: { count: cfg.readCount, blockMs: 100 },
      ack: perMessage
        ? { batchSize: 1, intervalMs: 0 }
        : { batchSize: cfg.batchSize, intervalMs: cfg.intervalMs },
      concurrency: cfg.concurrency,
    }),
    logger: ['error', 'warn'],
  });
  await app.listen();
  return () => app.close();
}

type Entry = [string, string[]];

async function startRaw(cfg: ConsumerConfig, recorder: Recorder): Promise<() => Promise<void>> {
  const redis = new Redis(cfg.redisUrl, { protocol: 2, maxRetriesPerRequest: null } as never);
  try {
    await redis.call('XGROUP', 'CREATE', cfg.stream, cfg.group, '0', 'MKSTREAM');
  } catch (err) {
    if (!String(err).includes('BUSYGROUP')) throw err;
  }
  let closing = false;
  let lastAck: Promise<unknown> = Promise.resolve();
  const loop = (async () => {
    while (!closing) {
      const reply = (await redis.call(
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
      )) as [string, Entry[]][] | null;
      if (!reply) continue;
      for (const [stream, entries] of reply) {
        const ids = new Array<string>(entries.length);
        for (let i = 0; i < entries.length; i++) {
          const [id, fields] = entries[i];
          ids[i] = id;
          recorder.record(JSON.parse(fields[1]) as Tick);
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
    await redis.quit();
  };
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.BENCH_TICKS_CONSUMER!) as ConsumerConfig;
  const recorder = new Recorder(cfg.warmup, cfg.expected, cfg.rssEveryMs, () =>
    send({ type: 'done' }),
  );
  const stop =
    cfg.variant === 'raw' ? await startRaw(cfg, recorder) : await startTransport(cfg, recorder);
  process.on('message', (msg: ParentMessage) => {
    if (msg.type !== 'stop') return;
    stop().then(
      () => {
        send({ type: 'consumer-result', result: recorder.result() });
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

main().catch((err: unknown) => {
  process.send?.({ type: 'error', error: err instanceof Error ? err.stack : String(err) });
  process.exitCode = 1;
  process.disconnect?.();
});
