/*
 * The forked producer of `npm run bench:ticks` (config in BENCH_TICKS_PRODUCER): ticks in
 * ClientRedisStreams' format (`XADD stream * data <JSON>`) with plain ioredis, for every variant:
 *   fixed: every ~1 ms, the messages due by then go out as one pipeline, each stamped with its own send time;
 *   max, drain: pipelines of `pipelineSize` XADDs, `pipelinesInFlight` at a time, as fast as Redis takes them.
 * Starts on { start }, sends { producer-result } when every message was written.
 */
import { Redis } from 'ioredis';
import { failToParent, toParent } from '../shared/child';
import { ChildMessage, hrNow, ParentMessage, ProducerConfig, ProducerResult } from './protocol';

const cfg = JSON.parse(process.env.BENCH_TICKS_PRODUCER!) as ProducerConfig;
const redis = new Redis(cfg.redisUrl, { protocol: 2 } as never);
const send = (msg: ChildMessage) => toParent(msg);

async function writeBatch(from: number, to: number): Promise<void> {
  const pipeline = redis.pipeline();
  for (let seq = from; seq < to; seq++) {
    const tick = {
      seq,
      symbol: `SYM${seq % 100}`,
      price: 100 + (seq % 1000) / 100,
      qty: 1 + (seq % 7),
    };
    pipeline.xadd(cfg.stream, '*', 'data', JSON.stringify({ ...tick, sentAt: hrNow() }));
  }
  for (const [err] of (await pipeline.exec()) ?? []) if (err) throw err;
}

async function fixedRate(): Promise<ProducerResult> {
  const start = hrNow();
  const writes = new Set<Promise<void>>();
  let sent = 0;
  let failure: unknown;
  while (sent < cfg.total && failure === undefined) {
    const due = Math.min(cfg.total, Math.floor(((hrNow() - start) * cfg.rate) / 1000));
    if (due > sent) {
      const w = writeBatch(sent, due).then(
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

async function maxRate(): Promise<ProducerResult> {
  const start = hrNow();
  let next = 0;
  const lane = async () => {
    while (next < cfg.total) {
      const from = next;
      next = Math.min(cfg.total, next + cfg.pipelineSize);
      await writeBatch(from, next);
    }
  };
  await Promise.all(Array.from({ length: cfg.pipelinesInFlight }, lane));
  return { sent: cfg.total, firstAt: start, lastAt: hrNow() };
}

async function main(): Promise<void> {
  await redis.ping();
  process.once('message', (msg: ParentMessage) => {
    if (msg.type !== 'start') return;
    (cfg.mode === 'fixed' ? fixedRate() : maxRate())
      .then((result) => send({ type: 'producer-result', result }))
      .catch((err: unknown) => send({ type: 'error', error: String(err) }))
      .finally(() => void redis.quit().finally(() => process.disconnect()));
  });
  process.once('disconnect', () => setTimeout(() => process.exit(1), 2000).unref());
  send({ type: 'ready' });
}

main().catch(failToParent);
