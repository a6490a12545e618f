/*
 * One row of bench:ticks: a forked producer and consumer on one stream, with the Redis command
 * counts and CPU of the run.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Child, forkTs } from '../shared/child';
import { otherCpuPercent, snapshotOtherCpu } from '../shared/other-cpu';
import {
  CommandStats,
  commandStats,
  deleteKeys,
  diffCommandStats,
  redisCpuUs,
} from '../shared/redis-stats';
import type { TicksBenchOptions } from './options';
import {
  ChildMessage,
  ConsumerConfig,
  ConsumerResult,
  Mode,
  OtelMode,
  ParentMessage,
  ProducerConfig,
  ProducerResult,
  Variant,
} from './protocol';
import type { Row } from './rows';

/**
 * Commands that only the idempotency scripts run here (the default key's mark script: SADD,
 * PEXPIRE, SET; the GET of the greatest done id is the consumer's own). Redis counts the commands
 * a script calls in their own commandstats too (and their time in the script's): when scripts
 * ran, these are reported as `lua:<command>` and left out of the sums of commands sent and of
 * Redis time.
 */
const SCRIPT_INNER = new Set(['set', 'pttl', 'del', 'sadd', 'pexpire']);
function diffStats(after: CommandStats, before: CommandStats): CommandStats {
  const scripts = ['evalsha', 'eval'].some((k) => (after[k]?.calls ?? 0) > (before[k]?.calls ?? 0));
  return diffCommandStats(
    after,
    before,
    (k) => k === 'info',
    (k) => (scripts && SCRIPT_INNER.has(k) ? `lua:${k}` : k),
  );
}

/** The commands a client sent (not those a script ran). */
const sentByClient = (cmd: string) => !cmd.startsWith('lua:');

export async function runOne(
  redis: Redis,
  redisUrl: string,
  o: TicksBenchOptions,
  mode: Mode,
  variant: Variant,
  run: number,
  otel?: OtelMode,
): Promise<Row> {
  const stream = `bench:ticks:${process.pid}:${run}:${mode}:${variant}${otel ? `:${otel}` : ''}`;
  const idempotencyPrefix = `${stream}:idem:`;
  const group = 'bench';
  const total = mode === 'fixed' ? Math.round(o.rate * o.durationS) : o.messages;
  const warmup = Math.round(o.rate * o.warmupS);
  const profile = o.cpuProfDir
    ? join(o.cpuProfDir, `${mode}-${variant}${otel ? `-otel-${otel}` : ''}-${run}.cpuprofile`)
    : undefined;
  await redis.del(stream);
  const consumerCfg: ConsumerConfig = {
    variant,
    redisUrl,
    stream,
    group,
    warmup,
    expected: total,
    batchSize: o.batchSize,
    intervalMs: o.intervalMs,
    readCount: o.readCount,
    concurrency: o.concurrency,
    rssEveryMs: 50,
    idempotencyPrefix,
    cpuProfile: profile,
    otel,
  };
  const producerCfg: ProducerConfig = {
    redisUrl,
    stream,
    mode,
    rate: o.rate,
    total: warmup + total,
    pipelineSize: o.pipelineSize,
    pipelinesInFlight: 4,
  };
  const doneTimeoutMs =
    mode === 'fixed'
      ? (o.durationS + o.warmupS) * 1000 + 60_000
      : Math.max(120_000, (warmup + total) / 2);
  type TicksChild = Child<ChildMessage, ParentMessage>;
  let consumer: TicksChild | undefined;
  let producer: TicksChild | undefined;
  const startConsumer = async (): Promise<TicksChild> => {
    consumer = forkTs(`consumer (${variant})`, join(__dirname, 'consumer.ts'), {
      env: { BENCH_TICKS_CONSUMER: JSON.stringify(consumerCfg) },
    });
    await consumer.waitFor('ready', 60_000);
    return consumer;
  };
  const startProducer = async (): Promise<TicksChild> => {
    producer = forkTs('producer', join(__dirname, 'producer.ts'), {
      env: { BENCH_TICKS_PRODUCER: JSON.stringify(producerCfg) },
    });
    await producer.waitFor('ready', 60_000);
    return producer;
  };
  try {
    let before: CommandStats;
    let p: ProducerResult;
    let c: TicksChild;
    let complete: boolean;
    let cpuBefore: ReturnType<typeof snapshotOtherCpu> = null;
    let redisCpuBefore: number | undefined;
    let cpuAfter: ReturnType<typeof snapshotOtherCpu> = null;
    const completion = (done: Promise<unknown>) =>
      done.then(
        () => true,
        (err: Error) => {
          process.stderr.write(`  ${err.message}: reporting what was handled\n`);
          return false;
        },
      );
    if (mode === 'drain') {
      // The whole backlog is written first; the consumer starts on a full stream.
      const prod = await startProducer();
      before = await commandStats(redis);
      const produced = prod.waitFor('producer-result', 600_000);
      prod.send({ type: 'start' });
      p = (await produced).result;
      await prod.exited;
      cpuBefore = snapshotOtherCpu();
      if (!o.redisUrl) redisCpuBefore = await redisCpuUs(redis);
      c = await startConsumer();
      complete = await completion(c.waitFor('done', doneTimeoutMs));
      cpuAfter = snapshotOtherCpu();
    } else {
      c = await startConsumer();
      const prod = await startProducer();
      before = await commandStats(redis);
      const done = c.waitFor('done', doneTimeoutMs);
      const produced = prod.waitFor('producer-result', o.durationS * 1000 + 600_000);
      cpuBefore = snapshotOtherCpu();
      prod.send({ type: 'start' });
      complete = await completion(done);
      cpuAfter = snapshotOtherCpu();
      p = (await produced).result;
    }
    const resultMsg = c.waitFor('consumer-result', 60_000);
    c.send({ type: 'stop' });
    const result: ConsumerResult = (await resultMsg).result;
    await Promise.all([c.exited, producer?.exited]);
    const redisCpu =
      redisCpuBefore === undefined ? undefined : (await redisCpuUs(redis)) - redisCpuBefore;
    const stats = diffStats(await commandStats(redis), before);
    const pendingAfter = Number(
      ((await redis.call('XPENDING', stream, group)) as [number, ...unknown[]])[0],
    );
    const unique = total - result.missing;
    // Commands and acks are counted over every message sent, warm-up included.
    const sent = warmup + unique;
    const calls = (cmd: string) => stats[cmd]?.calls ?? 0;
    const all = Object.entries(stats)
      .filter(([cmd]) => sentByClient(cmd))
      .reduce((a, [, v]) => a + v.calls, 0);
    const consumerUsec = Object.entries(stats)
      .filter(([cmd]) => cmd !== 'xadd' && sentByClient(cmd))
      .reduce((a, [, v]) => a + v.usec, 0);
    const server = result.server;
    return {
      mode,
      variant,
      otel,
      run,
      messages: unique,
      sent,
      msgsPerSec: unique / Math.max(1e-9, (result.lastAt - result.firstAt) / 1000),
      producerMsgsPerSec: p.sent / Math.max(1e-9, (p.lastAt - p.firstAt) / 1000),
      p50: result.p50,
      p99: result.p99,
      max: result.max,
      xackPer1000: (calls('xack') / sent) * 1000,
      scriptsPer1000: ((calls('evalsha') + calls('eval')) / sent) * 1000,
      cmdsPerMsg: all / sent,
      consumerCmdsPerMsg: (all - calls('xadd')) / sent,
      redisMsPer100k: (consumerUsec / 1000 / sent) * 100_000,
      redisCpuUsPerMsg: redisCpu === undefined ? undefined : redisCpu / sent,
      commands: Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, v.calls])),
      commandUsec: Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, v.usec])),
      peakRssMb: result.peakRssMb,
      cpuMsPer100k: (result.cpuMs / unique) * 100_000,
      avgBatch:
        server && server.batches > 0 ? server.delivered / server.batches : server ? 1 : undefined,
      loopDelayP99: result.loopDelayP99,
      loopDelayMax: result.loopDelayMax,
      pendingAfter,
      missing: result.missing,
      duplicates: result.duplicates,
      failedOrSkipped: server
        ? server.failed +
          server.duplicatesSkipped.memory +
          server.duplicatesSkipped.redis +
          server.inProgressSkipped
        : 0,
      complete,
      otherCpuPct: otherCpuPercent(cpuBefore, cpuAfter),
      profile: profile && existsSync(profile) ? profile : undefined,
    };
  } finally {
    await Promise.all([consumer?.kill(), producer?.kill()]);
    await redis.del(stream);
    await deleteKeys(redis, idempotencyPrefix);
  }
}
