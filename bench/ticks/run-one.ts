/* One row of bench:ticks: a forked producer and consumer on one stream, with the Redis command counts and CPU of the run. */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
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
import type { ChildMessage, ConsumerConfig, Mode, OtelMode, ParentMessage } from './protocol';
import type { ProducerConfig, Variant } from './protocol';

/**
 * Commands that only the idempotency scripts run here (SADD, PEXPIRE, SET; the GET of the
 * greatest done id is the consumer's own). Redis counts the commands a script calls in their own
 * commandstats too: when scripts ran, these are reported as `lua:<command>` and left out of the
 * sums of commands sent and of Redis time.
 */
const SCRIPT_INNER = new Set(['set', 'pttl', 'del', 'sadd', 'pexpire']);
function diffStats(after: CommandStats, before: CommandStats): CommandStats {
  const scripts = ['evalsha', 'eval'].some((k) => (after[k]?.calls ?? 0) > (before[k]?.calls ?? 0));
  const rename = (k: string) => (scripts && SCRIPT_INNER.has(k) ? `lua:${k}` : k);
  return diffCommandStats(after, before, (k) => k === 'info', rename);
}

type TicksChild = Child<ChildMessage, ParentMessage>;

export async function runOne(
  redis: Redis,
  redisUrl: string,
  o: TicksBenchOptions,
  mode: Mode,
  variant: Variant,
  run: number,
  otel?: OtelMode,
) {
  const stream = `bench:ticks:${process.pid}:${run}:${mode}:${variant}${otel ? `:${otel}` : ''}`;
  const idempotencyPrefix = `${stream}:idem:`;
  const group = 'bench';
  const total = mode === 'fixed' ? Math.round(o.rate * o.duration) : o.messages;
  const warmup = Math.round(o.rate * o.warmup);
  const profile =
    o['cpu-prof'] &&
    join(
      resolve(o['cpu-prof']),
      `${mode}-${variant}${otel ? `-otel-${otel}` : ''}-${run}.cpuprofile`,
    );
  await redis.del(stream);
  const consumerCfg: ConsumerConfig = {
    ...{ variant, redisUrl, stream, group, warmup, expected: total },
    ...{ batchSize: o['batch-size'], intervalMs: o.interval, readCount: o['read-count'] },
    ...{ concurrency: o.concurrency, rssEveryMs: 50, idempotencyPrefix, cpuProfile: profile, otel },
  };
  const producerCfg: ProducerConfig = {
    ...{ redisUrl, stream, mode, rate: o.rate, total: warmup + total },
    ...{ pipelineSize: o.pipeline, pipelinesInFlight: 4 },
  };
  const doneTimeoutMs =
    mode === 'fixed'
      ? (o.duration + o.warmup) * 1000 + 60_000
      : Math.max(120_000, (warmup + total) / 2);
  const children: TicksChild[] = [];
  const start = async (name: string, role: 'consumer' | 'producer', cfg: object) => {
    const env = { [`BENCH_TICKS_${role.toUpperCase()}`]: JSON.stringify(cfg) };
    const child: TicksChild = forkTs(name, join(__dirname, `${role}.ts`), { env });
    children.push(child);
    await child.waitFor('ready', 60_000);
    return child;
  };
  const startConsumer = () => start(`consumer (${variant})`, 'consumer', consumerCfg);
  try {
    let c = mode === 'drain' ? undefined : await startConsumer();
    const producer = await start('producer', 'producer', producerCfg);
    const before = await commandStats(redis);
    const produced = producer.waitFor('producer-result', o.duration * 1000 + 600_000);
    let cpuBefore = snapshotOtherCpu();
    let redisCpuBefore: number | undefined;
    producer.send({ type: 'start' });
    if (!c) {
      // drain: the whole backlog is written first; the consumer starts on a full stream.
      await produced;
      await producer.exited;
      cpuBefore = snapshotOtherCpu();
      if (!o['redis-url']) redisCpuBefore = await redisCpuUs(redis);
      c = await startConsumer();
    }
    const complete = await c.waitFor('done', doneTimeoutMs).then(
      () => true,
      (err: Error) => {
        process.stderr.write(`  ${err.message}: reporting what was handled\n`);
        return false;
      },
    );
    const cpuAfter = snapshotOtherCpu();
    const p = (await produced).result;
    const resultMsg = c.waitFor('consumer-result', 60_000);
    c.send({ type: 'stop' });
    const result = (await resultMsg).result;
    await Promise.all(children.map((x) => x.exited));
    const redisCpu =
      redisCpuBefore === undefined ? undefined : (await redisCpuUs(redis)) - redisCpuBefore;
    const stats = diffStats(await commandStats(redis), before);
    const pending = (await redis.call('XPENDING', stream, group)) as [number, ...unknown[]];
    const unique = total - result.missing;
    // Commands and acks are counted over every message sent, warm-up included.
    const sent = warmup + unique;
    const calls = (cmd: string) => stats[cmd]?.calls ?? 0;
    const byClient = Object.entries(stats).filter(([cmd]) => !cmd.startsWith('lua:'));
    const all = byClient.reduce((a, [, v]) => a + v.calls, 0);
    const consumerUsec = byClient
      .filter(([cmd]) => cmd !== 'xadd')
      .reduce((a, [, v]) => a + v.usec, 0);
    const server = result.server;
    const perS = (n: number, from: number, to: number) => n / Math.max(1e-9, (to - from) / 1000);
    const skipped = server && server.duplicatesSkipped.memory + server.duplicatesSkipped.redis;
    return {
      ...{ mode, variant, otel, run },
      /** Measured messages (each handled once); `sent`: warm-up included, what counts are per. */
      ...{ messages: unique, sent },
      /** Consumer throughput: messages handled / (last handled - first handled). */
      msgsPerSec: perS(unique, result.firstAt, result.lastAt),
      producerMsgsPerSec: perS(p.sent, p.firstAt, p.lastAt),
      ...{ p50: result.p50, p99: result.p99, max: result.max },
      xackPer1000: (calls('xack') / sent) * 1000,
      scriptsPer1000: ((calls('evalsha') + calls('eval')) / sent) * 1000,
      cmdsPerMsg: all / sent,
      consumerCmdsPerMsg: (all - calls('xadd')) / sent,
      /** Time Redis spent executing the consumer's commands (XADD excluded), per 100k messages. */
      redisMsPer100k: (consumerUsec / 1000 / sent) * 100_000,
      /**
       * drain: CPU time of the redis-server process from the consumer's start to its stop, per
       * message sent (µs per message = s per 1M). Undefined in the other modes (the producer
       * writes meanwhile) and with --redis-url.
       */
      redisCpuUsPerMsg: redisCpu === undefined ? undefined : redisCpu / sent,
      commands: Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, v.calls])),
      commandUsec: Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, v.usec])),
      peakRssMb: result.peakRssMb,
      cpuMsPer100k: (result.cpuMs / unique) * 100_000,
      /** Transport: entries per handler call. */
      avgBatch: server && (server.batches > 0 ? server.delivered / server.batches : 1),
      ...{ loopDelayP99: result.loopDelayP99, loopDelayMax: result.loopDelayMax },
      pendingAfter: Number(pending[0]),
      ...{ missing: result.missing, duplicates: result.duplicates },
      /** Transport: entries failed, or skipped as duplicates or in progress (none expected here). */
      failedOrSkipped: server ? server.failed + skipped! + server.inProgressSkipped : 0,
      complete,
      /** CPU used by processes outside the benchmark while the row ran, % of one core. */
      otherCpuPct: otherCpuPercent(cpuBefore, cpuAfter),
      profile: profile && existsSync(profile) ? profile : undefined,
    };
  } finally {
    await Promise.all(children.map((x) => x.kill()));
    await redis.del(stream);
    await deleteKeys(redis, idempotencyPrefix);
  }
}
