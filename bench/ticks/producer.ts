/*
 * The forked producer process of `npm run bench:ticks`. Config in BENCH_TICKS_PRODUCER (JSON).
 * Writes ticks in ClientRedisStreams' format (`XADD stream * data <JSON>`) with plain ioredis,
 * the same producer for every consumer variant:
 *   fixed: every ~1 ms, the messages due by then (rate x elapsed) go out as one pipeline, each
 *          stamped with its own send time;
 *   max:   pipelines of `pipelineSize` XADDs, `pipelinesInFlight` at a time, as fast as Redis takes them.
 * Starts on { start }, sends { producer-result } when every message was written.
 */
import { Redis } from 'ioredis';
import {
  ChildMessage,
  hrNow,
  ParentMessage,
  ProducerConfig,
  ProducerResult,
  Tick,
} from './protocol';
import { failToParent } from '../shared/child';

const send = (msg: ChildMessage) => process.send!(msg);

function tick(seq: number): string {
  const t: Tick = {
    seq,
    symbol: `SYM${seq % 100}`,
    price: 100 + (seq % 1000) / 100,
    qty: 1 + (seq % 7),
    sentAt: hrNow(),
  };
  return JSON.stringify(t);
}

async function writeBatch(redis: Redis, stream: string, from: number, to: number): Promise<void> {
  const pipeline = redis.pipeline();
  for (let seq = from; seq < to; seq++) pipeline.xadd(stream, '*', 'data', tick(seq));
  const res = (await pipeline.exec()) ?? [];
  for (const [err] of res) if (err) throw err;
}

async function fixedRate(redis: Redis, cfg: ProducerConfig): Promise<ProducerResult> {
  const start = hrNow();
  const writes = new Set<Promise<void>>();
  let sent = 0;
  let failure: unknown;
  while (sent < cfg.total && failure === undefined) {
    const due = Math.min(cfg.total, Math.floor(((hrNow() - start) * cfg.rate) / 1000));
    if (due > sent) {
      const w = writeBatch(redis, cfg.stream, sent, due).then(
        () => void writes.delete(w),
        (err: unknown) => void (failure = err),
      );
      writes.add(w);
      sent = due;
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(writes);
  if (failure !== undefined) throw failure;
  return { sent, firstAt: start, lastAt: hrNow() };
}

async function maxRate(redis: Redis, cfg: ProducerConfig): Promise<ProducerResult> {
  const start = hrNow();
  let next = 0;
  const lane = async () => {
    while (next < cfg.total) {
      const from = next;
      next = Math.min(cfg.total, next + cfg.pipelineSize);
      await writeBatch(redis, cfg.stream, from, next);
    }
  };
  await Promise.all(Array.from({ length: cfg.pipelinesInFlight }, lane));
  return { sent: cfg.total, firstAt: start, lastAt: hrNow() };
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.BENCH_TICKS_PRODUCER!) as ProducerConfig;
  const redis = new Redis(cfg.redisUrl, { protocol: 2 } as never);
  await redis.ping();
  process.once('message', (msg: ParentMessage) => {
    if (msg.type !== 'start') return;
    (cfg.mode === 'fixed' ? fixedRate(redis, cfg) : maxRate(redis, cfg))
      .then((result) => send({ type: 'producer-result', result }))
      .catch((err: unknown) => send({ type: 'error', error: String(err) }))
      .finally(() => {
        void redis.quit().finally(() => process.disconnect());
      });
  });
  process.once('disconnect', () => setTimeout(() => process.exit(1), 2000).unref());
  send({ type: 'ready' });
}

main().catch(failToParent);
