/*
 * npm run bench:ticks -- [options]
 *
 * Producer and consumer run as forked processes on a real Redis. For each mode and variant:
 *   modes     fixed: --rate msgs/s for --duration s;  max: --messages as fast as possible
 *   variants  per-message: ServerRedisStreams with ack.batchSize 1, ack.intervalMs 0 (one XACK per message)
 *             batch:       ServerRedisStreams with ack.batchSize --batch-size, ack.intervalMs --interval
 *             raw:         a plain ioredis loop, XREADGROUP COUNT --read-count + one XACK per batch (the ceiling)
 *
 *   --modes fixed,max          --variants per-message,batch,raw     --repeat 1 (runs of each row)
 *   --rate 10000   --duration 30 (seconds)   --messages 200000   --warmup 2 (seconds at --rate)
 *   --batch-size 500   --interval 50   --read-count 500   --concurrency 1000
 *   --pipeline 1000 (max mode: XADDs per pipeline, 4 in flight)
 *   --redis-url <url>          use this Redis instead of starting a throwaway redis-server
 *                              (INFO commandstats is server-wide: other clients' commands then count too)
 *   --cpu-prof <dir>           run the consumers with node --cpu-prof, profiles written to <dir>
 *   --json <file>              also write every number as JSON
 *   --demo [options]           instead: the demo-ticks app at 10,000 ticks/s (options in bench/demo-ticks/main.ts)
 *
 * By default the benchmark starts its OWN redis-server on a free port (and ignores REDIS_URL), so
 * that the command counts come from this benchmark only.
 */
import { ChildProcess, fork } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { collectEnvInfo, EnvInfo, formatEnvInfo, parseInfo } from '../shared/env-info';
import { Column, renderTable } from '../shared/table';
import {
  ChildMessage,
  ConsumerConfig,
  ConsumerResult,
  Mode,
  MODES,
  ProducerConfig,
  ProducerResult,
  Variant,
  VARIANTS,
} from './protocol';
import { OwnRedis, startOwnRedis } from './redis-server';

const REGISTER = join(__dirname, '..', '..', 'scripts', 'register-ts.js');

export interface TicksBenchOptions {
  modes: Mode[];
  variants: Variant[];
  repeat: number;
  rate: number;
  durationS: number;
  messages: number;
  warmupS: number;
  batchSize: number;
  intervalMs: number;
  readCount: number;
  concurrency: number;
  pipelineSize: number;
  redisUrl?: string;
  cpuProfDir?: string;
  json?: string;
}

export const DEFAULTS: TicksBenchOptions = {
  modes: [...MODES],
  variants: [...VARIANTS],
  repeat: 1,
  rate: 10_000,
  durationS: 30,
  messages: 200_000,
  warmupS: 2,
  batchSize: 500,
  intervalMs: 50,
  readCount: 500,
  concurrency: 1000,
  pipelineSize: 1000,
};

export interface Row {
  mode: Mode;
  variant: Variant;
  run: number;
  messages: number;
  /** Consumer throughput: messages handled / (last handled - first handled). */
  msgsPerSec: number;
  producerMsgsPerSec: number;
  /** max mode: msgsPerSec / the raw row's msgsPerSec of the same run. */
  ofRaw?: number;
  p50: number;
  p99: number;
  max: number;
  xackPer1000: number;
  cmdsPerMsg: number;
  consumerCmdsPerMsg: number;
  commands: Record<string, number>;
  peakRssMb: number;
  cpuMsPer1000: number;
  loopDelayP99: number;
  loopDelayMax: number;
  pendingAfter: number;
  missing: number;
  duplicates: number;
  complete: boolean;
}

function usage(message: string): never {
  process.stderr.write(
    `bench:ticks: ${message}\n(see the options at the top of bench/ticks/main.ts)\n`,
  );
  process.exit(2);
}

export function parseArgs(argv: string[]): TicksBenchOptions {
  const o: TicksBenchOptions = { ...DEFAULTS };
  const numbers: Record<string, keyof TicksBenchOptions> = {
    '--repeat': 'repeat',
    '--rate': 'rate',
    '--duration': 'durationS',
    '--messages': 'messages',
    '--warmup': 'warmupS',
    '--batch-size': 'batchSize',
    '--interval': 'intervalMs',
    '--read-count': 'readCount',
    '--concurrency': 'concurrency',
    '--pipeline': 'pipelineSize',
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? usage(`${flag} needs a value`);
    if (flag in numbers) {
      const n = Number(value());
      if (!Number.isFinite(n) || n < 0 || (n === 0 && flag !== '--warmup'))
        usage(`${flag} needs a positive number`);
      (o as unknown as Record<string, number>)[numbers[flag]] = n;
    } else if (flag === '--modes') {
      const list = value().split(',') as Mode[];
      if (list.some((m) => !MODES.includes(m))) usage(`--modes: one or more of ${MODES.join(',')}`);
      o.modes = list;
    } else if (flag === '--variants') {
      const list = value().split(',') as Variant[];
      if (list.some((v) => !VARIANTS.includes(v)))
        usage(`--variants: one or more of ${VARIANTS.join(',')}`);
      o.variants = list;
    } else if (flag === '--redis-url') o.redisUrl = value();
    else if (flag === '--cpu-prof') o.cpuProfDir = resolve(value());
    else if (flag === '--json') o.json = value();
    else usage(`unknown option ${argv[i]}`);
  }
  return o;
}

// ------------------------------------------------------------------ child processes

class Child {
  private readonly waiters: { type: string; resolve: (m: ChildMessage) => void }[] = [];
  private failure: Error | null = null;
  readonly exited: Promise<void>;

  constructor(
    readonly name: string,
    readonly proc: ChildProcess,
  ) {
    proc.on('message', (msg: ChildMessage) => {
      if (msg.type === 'error') return this.fail(new Error(`${name}: ${msg.error}`));
      const i = this.waiters.findIndex((w) => w.type === msg.type);
      if (i >= 0) this.waiters.splice(i, 1)[0].resolve(msg);
    });
    this.exited = new Promise((res) =>
      proc.once('exit', (code, signal) => {
        if (code !== 0 && !signal) this.fail(new Error(`${name} exited with code ${code}`));
        res();
      }),
    );
  }

  private fail(err: Error): void {
    this.failure ??= err;
  }

  /** Resolves with the next message of `type`; rejects on the child's error, its exit, or the timeout. */
  waitFor<T extends ChildMessage['type']>(
    type: T,
    timeoutMs: number,
  ): Promise<Extract<ChildMessage, { type: T }>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        clearInterval(poll);
        reject(new Error(`${this.name}: no "${type}" within ${timeoutMs} ms`));
      }, timeoutMs);
      const poll = setInterval(() => {
        if (this.failure) {
          clearTimeout(timer);
          clearInterval(poll);
          reject(this.failure);
        }
      }, 50);
      this.waiters.push({
        type,
        resolve: (m) => {
          clearTimeout(timer);
          clearInterval(poll);
          resolve(m as Extract<ChildMessage, { type: T }>);
        },
      });
    });
  }

  send(msg: { type: 'start' | 'stop' }): void {
    if (this.proc.connected) this.proc.send(msg);
  }

  async kill(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    await this.exited;
  }
}

function forkChild(
  name: string,
  file: string,
  env: Record<string, string>,
  execArgv: string[] = [],
): Child {
  const proc = fork(join(__dirname, file), [], {
    execArgv: [...execArgv, '-r', REGISTER],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Child(name, proc);
}

// ------------------------------------------------------------------ one run

async function commandStats(redis: Redis): Promise<Record<string, number>> {
  const info = parseInfo(await redis.info('commandstats'));
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(info)) {
    if (!key.startsWith('cmdstat_')) continue;
    const m = /calls=(\d+)/.exec(value);
    if (m) out[key.slice('cmdstat_'.length)] = Number(m[1]);
  }
  return out;
}

function diffStats(after: Record<string, number>, before: Record<string, number>) {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d > 0 && k !== 'info') out[k] = d;
  }
  return out;
}

async function runOne(
  redis: Redis,
  redisUrl: string,
  o: TicksBenchOptions,
  mode: Mode,
  variant: Variant,
  run: number,
): Promise<Row> {
  const stream = `bench:ticks:${process.pid}:${run}:${mode}:${variant}`;
  const group = 'bench';
  const total = mode === 'fixed' ? Math.round(o.rate * o.durationS) : o.messages;
  const warmup = Math.round(o.rate * o.warmupS);
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
  const profArgs = o.cpuProfDir
    ? [
        '--cpu-prof',
        '--cpu-prof-dir',
        o.cpuProfDir,
        '--cpu-prof-name',
        `${mode}-${variant}-${run}.cpuprofile`,
      ]
    : [];
  const consumer = forkChild(
    `consumer (${variant})`,
    'consumer.ts',
    { BENCH_TICKS_CONSUMER: JSON.stringify(consumerCfg) },
    profArgs,
  );
  let producer: Child | undefined;
  try {
    await consumer.waitFor('ready', 60_000);
    producer = forkChild('producer', 'producer.ts', {
      BENCH_TICKS_PRODUCER: JSON.stringify(producerCfg),
    });
    await producer.waitFor('ready', 60_000);
    const before = await commandStats(redis);
    const done = consumer.waitFor(
      'done',
      mode === 'fixed'
        ? (o.durationS + o.warmupS) * 1000 + 60_000
        : Math.max(120_000, (warmup + total) / 2),
    );
    const produced = producer.waitFor('producer-result', o.durationS * 1000 + 600_000);
    producer.send({ type: 'start' });
    const complete = await done.then(
      () => true,
      (err: Error) => {
        process.stderr.write(`  ${err.message}: reporting what was handled\n`);
        return false;
      },
    );
    const p = (await produced).result as ProducerResult;
    const resultMsg = consumer.waitFor('consumer-result', 60_000);
    consumer.send({ type: 'stop' });
    const c = (await resultMsg).result as ConsumerResult;
    await Promise.all([consumer.exited, producer.exited]);
    const commands = diffStats(await commandStats(redis), before);
    const pendingAfter = Number(
      ((await redis.call('XPENDING', stream, group)) as [number, ...unknown[]])[0],
    );
    const unique = total - c.missing;
    // Commands and acks are counted over every message sent, warm-up included.
    const sent = warmup + unique;
    const all = Object.values(commands).reduce((a, b) => a + b, 0);
    return {
      mode,
      variant,
      run,
      messages: unique,
      msgsPerSec: unique / Math.max(1e-9, (c.lastAt - c.firstAt) / 1000),
      producerMsgsPerSec: p.sent / Math.max(1e-9, (p.lastAt - p.firstAt) / 1000),
      p50: c.p50,
      p99: c.p99,
      max: c.max,
      xackPer1000: ((commands.xack ?? 0) / sent) * 1000,
      cmdsPerMsg: all / sent,
      consumerCmdsPerMsg: (all - (commands.xadd ?? 0)) / sent,
      commands,
      peakRssMb: c.peakRssMb,
      cpuMsPer1000: (c.cpuMs / unique) * 1000,
      loopDelayP99: c.loopDelayP99,
      loopDelayMax: c.loopDelayMax,
      pendingAfter,
      missing: c.missing,
      duplicates: c.duplicates,
      complete,
    };
  } finally {
    await Promise.all([consumer.kill(), producer?.kill()]);
    await redis.del(stream);
  }
}

// ------------------------------------------------------------------ report

const LABEL: Record<Variant, string> = {
  'per-message': 'transport, per-message ack (batchSize 1)',
  batch: 'transport, batch ack',
  raw: 'raw ioredis loop (ceiling)',
};

function columns(o: TicksBenchOptions): Column<Row>[] {
  return [
    {
      header: 'mode',
      value: (r) => (r.mode === 'fixed' ? `fixed ${o.rate}/s` : `max ${o.messages}`),
    },
    {
      header: 'consumer',
      value: (r) =>
        r.variant === 'batch'
          ? `${LABEL.batch} (${o.batchSize}/${o.intervalMs} ms)`
          : LABEL[r.variant],
    },
    { header: 'run', value: (r) => r.run },
    { header: 'msgs/s', value: (r) => Math.round(r.msgsPerSec) },
    {
      header: '% of raw',
      value: (r) => (r.ofRaw === undefined ? null : `${(r.ofRaw * 100).toFixed(0)} %`),
    },
    { header: 'p50 ms', value: (r) => r.p50, digits: 2 },
    { header: 'p99 ms', value: (r) => r.p99, digits: 2 },
    { header: 'max ms', value: (r) => r.max, digits: 1 },
    { header: 'XACK/1k', value: (r) => r.xackPer1000, digits: 2 },
    { header: 'cmds/msg', value: (r) => r.cmdsPerMsg, digits: 3 },
    { header: 'consumer cmds/msg', value: (r) => r.consumerCmdsPerMsg, digits: 3 },
    { header: 'peak RSS MB', value: (r) => r.peakRssMb, digits: 0 },
    { header: 'CPU ms/1k', value: (r) => r.cpuMsPer1000, digits: 1 },
    {
      header: 'loop delay p99/max ms',
      value: (r) => `${r.loopDelayP99.toFixed(0)} / ${r.loopDelayMax.toFixed(0)}`,
    },
    {
      header: 'check',
      value: (r) =>
        r.complete && r.missing === 0 && r.duplicates === 0 && r.pendingAfter === 0
          ? 'ok'
          : `missing ${r.missing}, dup ${r.duplicates}, pending ${r.pendingAfter}`,
    },
  ];
}

function targets(rows: Row[], o: TicksBenchOptions): string[] {
  const lines: string[] = [];
  for (const r of rows.filter((x) => x.variant === 'batch' && x.mode === 'fixed')) {
    const ok = r.xackPer1000 <= 2.5 && r.p99 < 10;
    lines.push(
      `fixed ${o.rate}/s, run ${r.run}: XACK/1k ${r.xackPer1000.toFixed(2)} (target <= 2.5), p99 ${r.p99.toFixed(2)} ms (target < 10): ${ok ? 'MET' : 'NOT MET'}`,
    );
  }
  for (const r of rows.filter(
    (x) => x.variant === 'batch' && x.mode === 'max' && x.ofRaw !== undefined,
  )) {
    lines.push(
      `max rate, run ${r.run}: ${Math.round(r.msgsPerSec)} msgs/s = ${(r.ofRaw! * 100).toFixed(0)} % of the raw loop (target >= 70 %): ${r.ofRaw! >= 0.7 ? 'MET' : 'NOT MET'}`,
    );
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  const fixed = rows.filter((x) => x.variant === 'batch' && x.mode === 'fixed');
  const max = rows.filter(
    (x) => x.variant === 'batch' && x.mode === 'max' && x.ofRaw !== undefined,
  );
  if (fixed.length > 1)
    lines.push(
      `fixed, median of ${fixed.length} runs: XACK/1k ${median(fixed.map((r) => r.xackPer1000)).toFixed(2)}, p99 ${median(fixed.map((r) => r.p99)).toFixed(2)} ms`,
    );
  if (max.length > 1)
    lines.push(
      `max rate, median of ${max.length} runs: ${(median(max.map((r) => r.ofRaw!)) * 100).toFixed(0)} % of the raw loop`,
    );
  return lines;
}

export async function runTicksBench(o: TicksBenchOptions): Promise<{ env: EnvInfo; rows: Row[] }> {
  let own: OwnRedis | undefined;
  if (!o.redisUrl) own = await startOwnRedis();
  const redisUrl = o.redisUrl ?? own!.url;
  const redis = new Redis(redisUrl, { protocol: 2 } as never);
  const rows: Row[] = [];
  try {
    const env = await collectEnvInfo(redis, redisUrl, [
      '@nestjs/core',
      '@nestjs/microservices',
      'ioredis',
      'rxjs',
    ]);
    const out = (s: string) => process.stdout.write(`${s}\n`);
    out('bench:ticks: Redis Streams consumer group, producer and consumer in forked processes');
    out(formatEnvInfo(env));
    out(
      own
        ? `Redis: a throwaway redis-server started for this run (${redisUrl}); commandstats count this benchmark only`
        : `Redis: ${redisUrl} (given with --redis-url); commandstats are server-wide, other clients count too`,
    );
    out(
      `fixed: ${o.rate} msgs/s for ${o.durationS} s; max: ${o.messages} messages, pipelines of ${o.pipelineSize} XADDs (4 in flight); repeat ${o.repeat}`,
    );
    out(
      `warm-up: the first ${Math.round(o.rate * o.warmupS)} messages of every run (${o.warmupS} s at ${o.rate}/s; in max mode as fast as the rest) are handled and acked but not measured`,
    );
    if (o.cpuProfDir) {
      mkdirSync(o.cpuProfDir, { recursive: true });
      out(`CPU profiles of the consumers: ${o.cpuProfDir}`);
    }
    out('');
    for (let run = 1; run <= o.repeat; run++) {
      for (const mode of o.modes) {
        const runRows: Row[] = [];
        for (const variant of o.variants) {
          process.stderr.write(`  run ${run}: ${mode} / ${variant} ...\n`);
          runRows.push(await runOne(redis, redisUrl, o, mode, variant, run));
        }
        const raw = runRows.find((r) => r.variant === 'raw');
        if (mode === 'max' && raw) for (const r of runRows) r.ofRaw = r.msgsPerSec / raw.msgsPerSec;
        rows.push(...runRows);
      }
    }
    out(renderTable(columns(o), rows));
    out('');
    out(
      'msgs/s: consumer throughput (handled / time from first to last handled). e2e latency: handler time',
    );
    out(
      "minus the producer's send time (performance.timeOrigin + performance.now() on both sides).",
    );
    out(
      'cmds/msg: every Redis command in INFO commandstats during the run (XADD included) per message;',
    );
    out(
      'consumer cmds/msg: the same without XADD. check: every message handled exactly once, none pending.',
    );
    const t = targets(rows, o);
    if (t.length) {
      out('');
      for (const line of t) out(line);
    }
    return { env, rows };
  } finally {
    await redis.quit();
    await own?.stop();
  }
}

async function main(): Promise<void> {
  if (process.argv.includes('--demo')) {
    // `npm run bench:ticks -- --demo [options]`: the demo app at 10,000 ticks/s (bench/demo-ticks).
    const demo = await import('../demo-ticks/main');
    const { options, json } = demo.parseDemoTicksArgs(process.argv.slice(2));
    const result = await demo.runDemoTicksBench(options);
    if (json) writeFileSync(json, `${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  const o = parseArgs(process.argv.slice(2));
  const report = await runTicksBench(o);
  if (o.json) {
    writeFileSync(o.json, `${JSON.stringify({ options: o, ...report }, null, 2)}\n`);
    process.stdout.write(`\nraw numbers written to ${o.json}\n`);
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
