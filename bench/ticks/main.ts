/*
 * npm run bench:ticks -- [options]
 *
 * Producer and consumer run as forked processes on a real Redis. For each mode and variant:
 *   modes     fixed: --rate msgs/s for --duration s, producer and consumer together
 *             drain: --messages (after the warm-up's) written first, then the consumer drains the backlog
 *             max:   --messages written as fast as possible while the consumer reads
 *   variants  per-message:   ServerRedisStreams, per-message handler, ack.batchSize 1, ack.intervalMs 0
 *             batch:         ServerRedisStreams, per-message handler, ack.batchSize --batch-size, ack.intervalMs --interval
 *             batch-idem-redis: batch + idempotency { store: 'redis' } (L1 LRU + Redis L2)
 *             batch-handler: ServerRedisStreams, batch handler (@EventPattern(stream, { batch: true })), batched acks
 *             idem-memory:   batch-handler + idempotency { store: 'memory' } (L1 LRU)
 *             idem-redis:    batch-handler + idempotency { store: 'redis' } (L1 LRU + Redis L2)
 *             raw:           a plain ioredis loop, XREADGROUP COUNT --read-count + one XACK per batch (the ceiling)
 *             raw-idem:      raw + the library's IdempotencyStore (L1 + L2) per batch (a diagnostic, not by default)
 *   Every consumer does the same work per message: parse it and record its latency and sequence number.
 *
 *   --modes fixed,drain        (default; max is also available)
 *   --variants a,b,...         the same variants for every mode; default per mode:
 *                              drain and max: batch,batch-idem-redis,batch-handler,idem-memory,idem-redis,raw
 *                              fixed:         batch-handler,idem-redis,raw
 *   --repeat 1 (runs of each row; the tables then add the median of each variant, the targets use medians)
 *   --rate 10000   --duration 30 (seconds)   --messages 200000   --warmup 2 (seconds at --rate)
 *   --batch-size 500   --interval 50   --read-count 500   --concurrency 1000
 *   --pipeline 1000 (max and drain modes: XADDs per pipeline, 4 in flight)
 *   --quiet 0                  before each row, wait up to this many seconds until processes outside
 *                              the benchmark use < 10 % of a core (every row reports their CPU: "others' CPU")
 *   --redis-url <url>          use this Redis instead of starting a throwaway redis-server
 *                              (INFO commandstats is server-wide: other clients' commands then count too)
 *   --cpu-prof <dir>           write a CPU profile of each consumer's measured window to <dir>
 *                              (<mode>-<variant>-<run>.cpuprofile) and print where the CPU went
 *   --json <file>              also write every number as JSON
 *   --otel none,api,sdk        run each library row once per OpenTelemetry setup of the consumer
 *                              (bench/ticks/otel-setup.ts): none = @opentelemetry/api not resolvable,
 *                              api = the API without an SDK, sdk-metrics = MeterProvider + Prometheus exporter, sdk = that
 *                              (collected once at the end) + tracer provider with a batch span
 *                              processor to a no-op exporter; adds a table of msgs/s and CPU vs none.
 *                              Default: as installed (the API, no SDK), no extra table.
 *                              e.g. --modes drain --variants batch-handler,batch --otel none,api,sdk --repeat 3
 *   --demo [options]           instead: the demo-ticks app at 10,000 ticks/s (options in bench/demo-ticks/main.ts)
 *   --rebalance [options]      instead: ordered partitions while consumers die, leave and join (bench/ticks/rebalance.ts)
 *
 * By default the benchmark starts its OWN redis-server on a free port (and ignores REDIS_URL), so
 * that the command counts come from this benchmark only.
 */
import { ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { collectEnvInfo, EnvInfo, formatEnvInfo, gitRevision, parseInfo } from '../shared/env-info';
import { otherCpuPercent, snapshotOtherCpu } from '../shared/other-cpu';
import { Column, renderTable } from '../shared/table';
import { formatProfileSummary, summarizeProfile } from './profile-summary';
import {
  ChildMessage,
  ConsumerConfig,
  ConsumerResult,
  Mode,
  MODES,
  OTEL_MODES,
  OtelMode,
  PLAIN_OF,
  ProducerConfig,
  ProducerResult,
  Variant,
  VARIANTS,
} from './protocol';
import { OwnRedis, startOwnRedis } from './redis-server';

const REGISTER = join(__dirname, '..', '..', 'scripts', 'register-ts.js');

export interface TicksBenchOptions {
  modes: Mode[];
  /** The variants of every mode; undefined: each mode's DEFAULT_VARIANTS. */
  variants?: Variant[];
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
  /** Before each row, wait up to this many seconds for other processes to leave the CPU (0: don't). */
  quietS: number;
  redisUrl?: string;
  cpuProfDir?: string;
  json?: string;
  /** One row per library variant and OpenTelemetry setup of the consumer; undefined: as installed. */
  otel?: OtelMode[];
}

/** The rows the targets need (see TARGETS), per mode. */
export const DEFAULT_VARIANTS: Record<Mode, readonly Variant[]> = {
  drain: ['batch', 'batch-idem-redis', 'batch-handler', 'idem-memory', 'idem-redis', 'raw'],
  max: ['batch', 'batch-idem-redis', 'batch-handler', 'idem-memory', 'idem-redis', 'raw'],
  fixed: ['batch-handler', 'idem-redis', 'raw'],
};

export const DEFAULTS: TicksBenchOptions = {
  modes: ['drain', 'fixed'],
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
  quietS: 0,
};

export function variantsOf(o: TicksBenchOptions, mode: Mode): readonly Variant[] {
  return o.variants ?? DEFAULT_VARIANTS[mode];
}

export interface Row {
  mode: Mode;
  variant: Variant;
  /** The consumer's OpenTelemetry setup (--otel); undefined: as installed, no SDK. */
  otel?: OtelMode;
  /** The run number, or 'median' for the median of the runs of one mode and variant. */
  run: number | 'median';
  /** Measured messages (each handled once). */
  messages: number;
  /** Every message written, warm-up included: the command counts are per these. */
  sent: number;
  /** Consumer throughput: messages handled / (last handled - first handled). */
  msgsPerSec: number;
  producerMsgsPerSec: number;
  /** drain and max modes: msgsPerSec / the raw row's msgsPerSec of the same run. */
  ofRaw?: number;
  /** Idempotent variants: cpuMsPer100k / their plain variant's (PLAIN_OF) of the same mode and run. */
  cpuVsPlain?: number;
  /**
   * drain: CPU time of the redis-server process (INFO CPU, user + system) from the consumer's
   * start to its stop, per message sent: µs per message = s per 1M. Undefined in the other modes
   * (the producer writes meanwhile) and with --redis-url.
   */
  redisCpuUsPerMsg?: number;
  /** drain: redisCpuUsPerMsg / the raw row's of the same run. */
  redisCpuVsRaw?: number;
  p50: number;
  p99: number;
  max: number;
  xackPer1000: number;
  /** EVALSHA + EVAL per 1000 messages (the idempotency scripts). */
  scriptsPer1000: number;
  cmdsPerMsg: number;
  consumerCmdsPerMsg: number;
  /** Time Redis spent executing the consumer's commands (commandstats usec, XADD excluded), per 100k messages. */
  redisMsPer100k: number;
  /** Calls per command during the run. */
  commands: Record<string, number>;
  /** Time Redis spent executing each command during the run (commandstats usec), µs. */
  commandUsec: Record<string, number>;
  peakRssMb: number;
  /** Consumer user + system CPU per 100,000 messages, ms. */
  cpuMsPer100k: number;
  /** Transport variants: entries per handler call (batch handlers: server.metrics() delivered / batches). */
  avgBatch?: number;
  loopDelayP99: number;
  loopDelayMax: number;
  pendingAfter: number;
  missing: number;
  duplicates: number;
  /** Transport: entries failed, or skipped as duplicates or in progress (none expected here). */
  failedOrSkipped: number;
  complete: boolean;
  /**
   * CPU used by processes outside the benchmark while the row ran (drain: from the consumer's
   * start; fixed, max: from the producer's start; to the last message), % of one core.
   */
  otherCpuPct?: number;
  /** --cpu-prof: the profile of the measured window. */
  profile?: string;
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
    '--quiet': 'quietS',
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? usage(`${flag} needs a value`);
    if (flag in numbers) {
      const n = Number(value());
      if (!Number.isFinite(n) || n < 0 || (n === 0 && flag !== '--warmup' && flag !== '--quiet'))
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
    else if (flag === '--otel') {
      const list = value().split(',') as OtelMode[];
      if (list.some((m) => !OTEL_MODES.includes(m)))
        usage(`--otel: one or more of ${OTEL_MODES.join(',')}`);
      o.otel = list;
    } else usage(`unknown option ${argv[i]}`);
  }
  return o;
}

// ------------------------------------------------------------------ child processes

class Child {
  private readonly waiters: { type: string; resolve: (m: ChildMessage) => void }[] = [];
  /** Messages that arrived while nobody waited for their type. */
  private readonly unclaimed: ChildMessage[] = [];
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
      else this.unclaimed.push(msg);
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
    const early = this.unclaimed.findIndex((m) => m.type === type);
    if (early >= 0)
      return Promise.resolve(
        this.unclaimed.splice(early, 1)[0] as Extract<ChildMessage, { type: T }>,
      );
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

function forkChild(name: string, file: string, env: Record<string, string>): Child {
  const proc = fork(join(__dirname, file), [], {
    execArgv: ['-r', REGISTER],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Child(name, proc);
}

// ------------------------------------------------------------------ one run

type CommandStats = Record<string, { calls: number; usec: number }>;

async function commandStats(redis: Redis): Promise<CommandStats> {
  const info = parseInfo(await redis.info('commandstats'));
  const out: CommandStats = {};
  for (const [key, value] of Object.entries(info)) {
    if (!key.startsWith('cmdstat_')) continue;
    const calls = /calls=(\d+)/.exec(value);
    const usec = /usec=(\d+)/.exec(value);
    if (calls)
      out[key.slice('cmdstat_'.length)] = {
        calls: Number(calls[1]),
        usec: usec ? Number(usec[1]) : 0,
      };
  }
  return out;
}

/**
 * Commands that only the idempotency scripts run here (the default key's mark script: SADD,
 * PEXPIRE, SET; the GET of the greatest done id is the consumer's own). Redis counts the commands
 * a script calls in their own commandstats too (and their time in the script's): when scripts
 * ran, these are reported as `lua:<command>` and left out of the sums of commands sent and of
 * Redis time.
 */
const SCRIPT_INNER = new Set(['set', 'pttl', 'del', 'sadd', 'pexpire']);

function diffStats(after: CommandStats, before: CommandStats): CommandStats {
  const out: CommandStats = {};
  const scripts = ['evalsha', 'eval'].some((k) => (after[k]?.calls ?? 0) > (before[k]?.calls ?? 0));
  for (const [k, v] of Object.entries(after)) {
    const calls = v.calls - (before[k]?.calls ?? 0);
    if (calls > 0 && k !== 'info')
      out[scripts && SCRIPT_INNER.has(k) ? `lua:${k}` : k] = {
        calls,
        usec: v.usec - (before[k]?.usec ?? 0),
      };
  }
  return out;
}

/** CPU time of the redis-server process so far (INFO CPU: user + system, all threads), µs. */
async function redisCpuUs(redis: Redis): Promise<number> {
  const info = parseInfo(await redis.info('cpu'));
  return (Number(info.used_cpu_user) + Number(info.used_cpu_sys)) * 1e6;
}

/** The commands a client sent (not those a script ran). */
const sentByClient = (cmd: string) => !cmd.startsWith('lua:');

/** Deletes the keys under `prefix` (the idempotency records of a run). */
async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 5000);
    if (keys.length > 0) await redis.unlink(...keys);
    cursor = next;
  } while (cursor !== '0');
}

async function runOne(
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
  let consumer: Child | undefined;
  let producer: Child | undefined;
  const startConsumer = async (): Promise<Child> => {
    consumer = forkChild(`consumer (${variant})`, 'consumer.ts', {
      BENCH_TICKS_CONSUMER: JSON.stringify(consumerCfg),
    });
    await consumer.waitFor('ready', 60_000);
    return consumer;
  };
  const startProducer = async (): Promise<Child> => {
    producer = forkChild('producer', 'producer.ts', {
      BENCH_TICKS_PRODUCER: JSON.stringify(producerCfg),
    });
    await producer.waitFor('ready', 60_000);
    return producer;
  };
  try {
    let before: CommandStats;
    let p: ProducerResult;
    let c: Child;
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

// ------------------------------------------------------------------ report

const LABEL: Record<Variant, string> = {
  'per-message': 'transport, per-message ack (batchSize 1)',
  batch: 'transport, per-message handler, batch ack',
  'batch-idem-redis': 'per-message handler + idempotency (L1 + Redis L2)',
  'batch-handler': 'transport, batch handler',
  'idem-memory': 'batch handler + idempotency (memory L1)',
  'idem-redis': 'batch handler + idempotency (L1 + Redis L2)',
  raw: 'raw ioredis loop (ceiling)',
  'raw-idem': 'raw loop + IdempotencyStore (L1 + L2)',
};

function modeLabel(mode: Mode, o: TicksBenchOptions): string {
  if (mode === 'fixed') return `fixed ${o.rate}/s`;
  return `${mode} ${o.messages}`;
}

function isOk(r: Row): boolean {
  return (
    r.complete &&
    r.missing === 0 &&
    r.duplicates === 0 &&
    r.pendingAfter === 0 &&
    r.failedOrSkipped === 0
  );
}

export function columns(o: TicksBenchOptions): Column<Row>[] {
  return [
    { header: 'mode', value: (r) => modeLabel(r.mode, o) },
    {
      header: 'consumer',
      value: (r) =>
        (r.variant === 'batch'
          ? `${LABEL.batch} (${o.batchSize}/${o.intervalMs} ms)`
          : LABEL[r.variant]) + (r.otel ? `, otel ${r.otel}` : ''),
    },
    { header: 'run', value: (r) => String(r.run) },
    { header: 'msgs/s', value: (r) => Math.round(r.msgsPerSec) },
    {
      header: '% of raw',
      value: (r) => (r.ofRaw === undefined ? null : `${(r.ofRaw * 100).toFixed(0)} %`),
    },
    { header: 'p50 ms', value: (r) => r.p50, digits: 2 },
    { header: 'p99 ms', value: (r) => r.p99, digits: 2 },
    { header: 'max ms', value: (r) => r.max, digits: 1 },
    { header: 'XACK/1k', value: (r) => r.xackPer1000, digits: 2 },
    { header: 'Lua/1k', value: (r) => r.scriptsPer1000, digits: 2 },
    { header: 'consumer cmds/msg', value: (r) => r.consumerCmdsPerMsg, digits: 3 },
    { header: 'CPU ms/100k', value: (r) => r.cpuMsPer100k, digits: 0 },
    {
      header: 'CPU vs plain',
      value: (r) => (r.cpuVsPlain === undefined ? null : `${r.cpuVsPlain.toFixed(2)}x`),
    },
    { header: 'Redis ms/100k', value: (r) => r.redisMsPer100k, digits: 0 },
    { header: 'Redis CPU s/1M', value: (r) => r.redisCpuUsPerMsg ?? null, digits: 2 },
    {
      header: 'Redis CPU vs raw',
      value: (r) => (r.redisCpuVsRaw === undefined ? null : `${r.redisCpuVsRaw.toFixed(2)}x`),
    },
    { header: 'avg batch', value: (r) => r.avgBatch ?? null, digits: 0 },
    { header: 'peak RSS MB', value: (r) => r.peakRssMb, digits: 0 },
    {
      header: 'loop delay p99/max ms',
      value: (r) => `${r.loopDelayP99.toFixed(0)} / ${r.loopDelayMax.toFixed(0)}`,
    },
    {
      header: "others' CPU",
      value: (r) => (r.otherCpuPct === undefined ? null : `${r.otherCpuPct.toFixed(0)} %`),
    },
    {
      header: 'check',
      value: (r) =>
        isOk(r)
          ? 'ok'
          : `missing ${r.missing}, dup ${r.duplicates}, pending ${r.pendingAfter}, failed/skipped ${r.failedOrSkipped}${r.complete ? '' : ', timed out'}`,
    },
  ];
}

export function median(xs: number[]): number {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** Per mode and variant: a row of the medians of its runs (when there are several). */
export function medianRows(rows: Row[]): Row[] {
  const out: Row[] = [];
  const groups = new Map<string, Row[]>();
  for (const r of rows) {
    const key = `${r.mode}\u0000${r.variant}\u0000${r.otel ?? ''}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  for (const group of groups.values()) {
    if (group.length < 2) continue;
    const m = (f: (r: Row) => number | undefined) => {
      const xs = group.map(f).filter((x): x is number => x !== undefined);
      return xs.length === 0 ? undefined : median(xs);
    };
    const first = group[0];
    const perCommand = (f: (r: Row) => Record<string, number>) =>
      Object.fromEntries(
        [...new Set(group.flatMap((r) => Object.keys(f(r))))].map((k) => [
          k,
          median(group.map((r) => f(r)[k] ?? 0)),
        ]),
      );
    out.push({
      ...first,
      run: 'median',
      messages: m((r) => r.messages)!,
      sent: m((r) => r.sent)!,
      commands: perCommand((r) => r.commands),
      commandUsec: perCommand((r) => r.commandUsec),
      msgsPerSec: m((r) => r.msgsPerSec)!,
      producerMsgsPerSec: m((r) => r.producerMsgsPerSec)!,
      ofRaw: m((r) => r.ofRaw),
      cpuVsPlain: m((r) => r.cpuVsPlain),
      redisCpuUsPerMsg: m((r) => r.redisCpuUsPerMsg),
      redisCpuVsRaw: m((r) => r.redisCpuVsRaw),
      p50: m((r) => r.p50)!,
      p99: m((r) => r.p99)!,
      max: m((r) => r.max)!,
      xackPer1000: m((r) => r.xackPer1000)!,
      scriptsPer1000: m((r) => r.scriptsPer1000)!,
      cmdsPerMsg: m((r) => r.cmdsPerMsg)!,
      consumerCmdsPerMsg: m((r) => r.consumerCmdsPerMsg)!,
      redisMsPer100k: m((r) => r.redisMsPer100k)!,
      peakRssMb: m((r) => r.peakRssMb)!,
      cpuMsPer100k: m((r) => r.cpuMsPer100k)!,
      avgBatch: m((r) => r.avgBatch),
      loopDelayP99: m((r) => r.loopDelayP99)!,
      loopDelayMax: m((r) => r.loopDelayMax)!,
      pendingAfter: Math.max(...group.map((r) => r.pendingAfter)),
      missing: Math.max(...group.map((r) => r.missing)),
      duplicates: Math.max(...group.map((r) => r.duplicates)),
      failedOrSkipped: Math.max(...group.map((r) => r.failedOrSkipped)),
      complete: group.every((r) => r.complete),
      otherCpuPct: m((r) => r.otherCpuPct),
      profile: undefined,
    });
  }
  return out;
}

/** Fills in "% of raw" (drain, max) and "CPU vs plain" (idempotent variants) from the rows of the same run. */
export function relate(runRows: Row[]): void {
  const raw = runRows.find((r) => r.variant === 'raw');
  for (const r of runRows) {
    if (r.mode !== 'fixed' && raw) r.ofRaw = r.msgsPerSec / raw.msgsPerSec;
    if (raw?.redisCpuUsPerMsg && r.redisCpuUsPerMsg !== undefined)
      r.redisCpuVsRaw = r.redisCpuUsPerMsg / raw.redisCpuUsPerMsg;
    const plain = runRows.find(
      (p) =>
        p.variant === PLAIN_OF[r.variant] && (p.otel === r.otel || p.variant.startsWith('raw')),
    );
    if (plain) r.cpuVsPlain = r.cpuMsPer100k / plain.cpuMsPer100k;
  }
}

export interface TargetResult {
  target: string;
  /** The library's value (the median over runs when there are several). */
  measured: string;
  /** The raw loop's value of the same runs. */
  raw: string;
  verdict: 'met' | 'NOT MET' | 'not run';
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** Rows that ran while other processes used more than this much CPU (% of a core) "shared the machine". */
export const SHARED_CPU_PCT = 10;

const sharedMachine = (r: Row) => (r.otherCpuPct ?? 0) > SHARED_CPU_PCT;

/**
 * The targets of the issue ("Targets (in npm run bench:ticks ...)"), from the measured rows: the
 * median over the runs in which the rows a target compares (the library's and the raw loop's or
 * the plain transport's) had the machine to themselves; over every run when none did.
 */
export function evaluateTargets(rows: Row[], o: TicksBenchOptions): TargetResult[] {
  const out: TargetResult[] = [];
  /** Per run: the row of `variant` and the row it is compared with (`other`), same mode and run. */
  const runsOf = (mode: Mode, variant: Variant, other: Variant) => {
    const all: { lib: Row; other: Row }[] = [];
    for (const lib of rows)
      if (lib.mode === mode && lib.variant === variant && lib.run !== 'median') {
        const cmp = rows.find((r) => r.mode === mode && r.variant === other && r.run === lib.run);
        if (cmp) all.push({ lib, other: cmp });
      }
    const clean = all.filter((x) => !sharedMachine(x.lib) && !sharedMachine(x.other));
    const used = clean.length > 0 ? clean : all;
    const note =
      used.length === 0
        ? ''
        : clean.length === 0
          ? ' [every run shared the machine]'
          : clean.length < all.length
            ? ` [${clean.length} of ${all.length} runs; ${all.length - clean.length} left out: machine shared]`
            : '';
    return { used, note };
  };
  const perRun = (xs: number[], f: (x: number) => string) =>
    xs.length > 1 ? ` (runs: ${xs.map(f).join(' / ')})` : '';
  const notRun = (target: string) =>
    out.push({ target, measured: '-', raw: '-', verdict: 'not run' });
  const drain = `drain of a ${fmt(o.messages + Math.round(o.rate * o.warmupS))} backlog`;

  const ofRawTarget = (variant: Variant, what: string, min: number) => {
    const target = `${drain}, ${what}: >= ${min * 100} % of the raw loop's msgs/s`;
    const { used, note } = runsOf('drain', variant, 'raw');
    if (used.length === 0) return notRun(target);
    const ratios = used.map((x) => x.lib.msgsPerSec / x.other.msgsPerSec);
    const m = median(ratios);
    out.push({
      target,
      measured: `${fmt(median(used.map((x) => x.lib.msgsPerSec)))} msgs/s = ${(m * 100).toFixed(0)} %${perRun(ratios, (x) => `${(x * 100).toFixed(0)} %`)}${note}`,
      raw: `${fmt(median(used.map((x) => x.other.msgsPerSec)))} msgs/s`,
      verdict: m >= min ? 'met' : 'NOT MET',
    });
  };
  ofRawTarget('batch-handler', 'plain batch handler', 0.85);
  ofRawTarget('idem-memory', 'batch handler + idempotency (memory L1)', 0.85);
  ofRawTarget('idem-redis', 'batch handler + idempotency (L1 + L2)', 0.6);
  ofRawTarget('batch', 'per-message handler', 0.75);
  ofRawTarget('batch-idem-redis', 'per-message handler + idempotency (L1 + L2)', 0.5);
  {
    const target = `${drain}, batch handler + idempotency (L1 + L2): Redis CPU per message <= 2.5x the raw loop's`;
    const { used, note } = runsOf('drain', 'idem-redis', 'raw');
    const measured = used.filter(
      (x) => x.lib.redisCpuUsPerMsg !== undefined && x.other.redisCpuUsPerMsg !== undefined,
    );
    if (measured.length === 0) notRun(target);
    else {
      const ratios = measured.map((x) => x.lib.redisCpuUsPerMsg! / x.other.redisCpuUsPerMsg!);
      const m = median(ratios);
      const perM = (xs: number[]) => `${fmt(median(xs), 2)} s per 1M`;
      out.push({
        target,
        measured: `${perM(measured.map((x) => x.lib.redisCpuUsPerMsg!))} = ${m.toFixed(2)}x${perRun(ratios, (x) => `${x.toFixed(2)}x`)}${note}`,
        raw: perM(measured.map((x) => x.other.redisCpuUsPerMsg!)),
        verdict: m <= 2.5 ? 'met' : 'NOT MET',
      });
    }
  }

  const fixed = `${fmt(o.rate)} msgs/s for ${o.durationS} s, idempotency (L1 + L2)`;
  const againstRaw = runsOf('fixed', 'idem-redis', 'raw');
  const allFixedIdem = rows.filter(
    (r) => r.mode === 'fixed' && r.variant === 'idem-redis' && r.run !== 'median',
  );
  const fixedTarget = (
    what: string,
    value: (r: Row) => number,
    ok: (v: number, rows: Row[]) => boolean,
    show: (v: number) => string,
    extra: (rows: Row[]) => string = () => '',
  ) => {
    const target = `${fixed}: ${what}`;
    const { used, note } = againstRaw;
    if (used.length === 0) return notRun(target);
    const libRows = used.map((x) => x.lib);
    const values = libRows.map(value);
    const v = median(values);
    out.push({
      target,
      measured: `${show(v)}${extra(libRows)}${perRun(values, show)}${note}`,
      raw: show(median(used.map((x) => value(x.other)))),
      verdict: ok(v, libRows) ? 'met' : 'NOT MET',
    });
  };
  fixedTarget(
    `keeps up (>= 98 % of ${fmt(o.rate)} msgs/s, every message handled once)`,
    (r) => r.msgsPerSec,
    // Exactly once in every run, shared machine or not.
    (v) => v >= 0.98 * o.rate && allFixedIdem.every(isOk),
    (v) => `${fmt(v)} msgs/s`,
    () => (allFixedIdem.every(isOk) ? ', all handled once' : ', NOT all handled once'),
  );
  fixedTarget(
    'e2e p99 < 25 ms',
    (r) => r.p99,
    (v) => v < 25,
    (v) => `${fmt(v, 2)} ms`,
  );
  {
    const target = `${fixed}: CPU per 100k messages <= 2x the plain transport's (batch handler)`;
    const { used, note } = runsOf('fixed', 'idem-redis', 'batch-handler');
    if (used.length === 0) notRun(target);
    else {
      const ratios = used.map((x) => x.lib.cpuMsPer100k / x.other.cpuMsPer100k);
      const m = median(ratios);
      const raw = runsOf('fixed', 'raw', 'raw').used.map((x) => x.lib.cpuMsPer100k);
      out.push({
        target,
        measured: `${fmt(median(used.map((x) => x.lib.cpuMsPer100k)))} ms = ${m.toFixed(2)}x plain (${fmt(median(used.map((x) => x.other.cpuMsPer100k)))} ms)${perRun(ratios, (x) => `${x.toFixed(2)}x`)}${note}`,
        raw: raw.length === 0 ? '-' : `${fmt(median(raw))} ms`,
        verdict: m <= 2 ? 'met' : 'NOT MET',
      });
    }
  }
  fixedTarget(
    'XACK calls <= 2.5 per 1000 messages',
    (r) => r.xackPer1000,
    (v) => v <= 2.5,
    (v) => fmt(v, 2),
  );
  return out;
}

export const TARGET_COLUMNS: Column<TargetResult>[] = [
  { header: 'target', value: (t) => t.target },
  { header: 'measured (library)', value: (t) => t.measured },
  { header: 'raw loop, same runs', value: (t) => t.raw },
  { header: 'verdict', value: (t) => t.verdict },
];

const LEGEND = [
  'msgs/s: consumer throughput (handled / time from first to last handled message). % of raw',
  "(drain, max): msgs/s / the raw loop's of the same run. e2e latency: handler time minus the",
  "producer's send time (performance.timeOrigin + performance.now() on both sides). XACK/1k, Lua/1k",
  '(EVALSHA + EVAL: the idempotency scripts) and consumer cmds/msg (every command but XADD): from',
  'INFO commandstats, over every message sent (warm-up included). CPU ms/100k: consumer user + system',
  'CPU per 100,000 measured messages. CPU vs plain: this row / the batch handler row of the same run',
  "(raw-idem: / the raw row). Redis ms/100k: time Redis spent executing the consumer's commands",
  '(commandstats usec, XADD excluded). Redis CPU s/1M (drain): CPU time of the redis-server process',
  "(INFO CPU, user + system) from the consumer's start to its stop, per 1M messages; vs raw: / the",
  "raw row's of the same run. avg batch: entries per handler call (server.metrics()).",
  "others' CPU: CPU used by processes outside the benchmark during the row (100 % = one core of 2):",
  'above a few % the row shared the machine and its throughput and tails are not this code alone.',
  'check: every message handled exactly once, none pending, none failed or skipped.',
  'Rows "median": the median of each column over the runs.',
];

const per100k = (r: Row, cmds: string[]) => {
  const usec = cmds.reduce((a, c) => a + (r.commandUsec[c] ?? 0), 0);
  return r.sent > 0 ? (usec / 1000 / r.sent) * 100_000 : NaN;
};

/** Where Redis spent its time on each row: the stream commands, the idempotency scripts. */
export const REDIS_COLUMNS: Column<Row>[] = [
  { header: 'mode', value: (r) => r.mode },
  { header: 'consumer', value: (r) => r.variant },
  { header: 'run', value: (r) => String(r.run) },
  { header: 'XREADGROUP', value: (r) => per100k(r, ['xreadgroup']), digits: 0 },
  { header: 'XACK', value: (r) => per100k(r, ['xack']), digits: 0 },
  { header: 'EVALSHA/EVAL', value: (r) => per100k(r, ['evalsha', 'eval']), digits: 0 },
  {
    header: 'µs per script call',
    value: (r) => {
      const calls = (r.commands.evalsha ?? 0) + (r.commands.eval ?? 0);
      const usec = (r.commandUsec.evalsha ?? 0) + (r.commandUsec.eval ?? 0);
      return calls > 0 ? usec / calls : null;
    },
    digits: 0,
  },
  { header: 'all but XADD', value: (r) => r.redisMsPer100k, digits: 0 },
  {
    header: 'Redis busy on them while measured',
    value: (r) => `${(((r.redisMsPer100k / 100_000) * r.msgsPerSec) / 10).toFixed(0)} %`,
  },
];

interface OtelCostRow {
  row: Row;
  /** msgs/s and CPU of this row / the `none` row of the same mode, variant and run. */
  throughput?: number;
  cpu?: number;
}

/** Per mode, library variant and run (or median): every --otel row against its `none` row. */
export function otelCostRows(rows: Row[], medians: Row[]): OtelCostRow[] {
  const all = [...rows, ...medians].filter((r) => r.otel !== undefined);
  return all.map((row) => {
    const base = all.find(
      (b) =>
        b.otel === 'none' && b.mode === row.mode && b.variant === row.variant && b.run === row.run,
    );
    return base
      ? {
          row,
          throughput: row.msgsPerSec / base.msgsPerSec,
          cpu: row.cpuMsPer100k / base.cpuMsPer100k,
        }
      : { row };
  });
}

const pct = (x: number | undefined) =>
  x === undefined ? null : `${x >= 1 ? '+' : ''}${((x - 1) * 100).toFixed(1)} %`;

export const OTEL_COLUMNS: Column<OtelCostRow>[] = [
  { header: 'mode', value: (c) => c.row.mode },
  { header: 'consumer', value: (c) => LABEL[c.row.variant] },
  { header: 'otel', value: (c) => c.row.otel ?? '' },
  { header: 'run', value: (c) => String(c.row.run) },
  { header: 'msgs/s', value: (c) => Math.round(c.row.msgsPerSec) },
  { header: 'msgs/s vs none', value: (c) => pct(c.throughput) },
  { header: 'CPU ms/100k', value: (c) => c.row.cpuMsPer100k, digits: 0 },
  { header: 'CPU vs none', value: (c) => pct(c.cpu) },
  { header: 'check', value: (c) => (isOk(c.row) ? 'ok' : 'NOT ok') },
];

const OTEL_LEGEND =
  'otel: none = @opentelemetry/api not resolvable in the consumer; api = the API without an SDK; ' +
  'sdk-metrics = MeterProvider + Prometheus exporter only; sdk = MeterProvider + Prometheus exporter (one collection at the end) + tracer provider, batch span processor, ' +
  'no-op exporter. Targets: api >= -2 % msgs/s, sdk >= -10 % msgs/s vs none (medians with --repeat).';

export interface TicksReport {
  env: EnvInfo;
  /** The commit of libs/stream-batch-ack that was measured. */
  revision: string;
  rows: Row[];
  medians: Row[];
  targets: TargetResult[];
}

/** Waits (at most `maxS` seconds) until processes outside the benchmark leave the CPU. */
async function waitForQuiet(maxS: number, progress: (line: string) => void): Promise<void> {
  if (maxS <= 0) return;
  const deadline = Date.now() + maxS * 1000;
  let told = false;
  for (;;) {
    const before = snapshotOtherCpu();
    await new Promise((r) => setTimeout(r, 1000));
    const pct = otherCpuPercent(before, snapshotOtherCpu());
    if (pct === undefined || pct <= SHARED_CPU_PCT) return;
    if (Date.now() >= deadline) {
      progress(`  the machine is still busy (others' CPU ${pct.toFixed(0)} %): running anyway`);
      return;
    }
    if (!told)
      progress(`  waiting up to ${maxS} s for a quiet machine (others' CPU ${pct.toFixed(0)} %)`);
    told = true;
  }
}

export async function runTicksBench(
  o: TicksBenchOptions,
  out: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
  progress: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Promise<TicksReport> {
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
    out('bench:ticks: Redis Streams consumer group, producer and consumer in forked processes');
    out(formatEnvInfo(env));
    const revision = gitRevision(['libs/stream-batch-ack']);
    out(`@nest-redis-resilience/stream-batch-ack (libs/stream-batch-ack) at ${revision}`);
    out(
      own
        ? `Redis: a throwaway redis-server started for this run (${redisUrl}); commandstats count this benchmark only`
        : `Redis: ${redisUrl} (given with --redis-url); commandstats are server-wide, other clients count too`,
    );
    const warmup = Math.round(o.rate * o.warmupS);
    const plan = o.modes.map((m) => `${m}: ${variantsOf(o, m).join(', ')}`).join('; ');
    out(
      `fixed: ${o.rate} msgs/s for ${o.durationS} s; drain: a backlog of ${warmup} + ${o.messages} messages written first, then consumed; max: ${o.messages} messages written as fast as possible while consumed (pipelines of ${o.pipelineSize} XADDs, 4 in flight); repeat ${o.repeat}`,
    );
    out(`rows: ${plan}`);
    out(
      `warm-up: the first ${warmup} messages of every run (${o.warmupS} s at ${o.rate}/s; in drain and max mode as fast as the rest) are handled and acked but not measured`,
    );
    if (o.cpuProfDir) {
      mkdirSync(o.cpuProfDir, { recursive: true });
      out(`CPU profiles of the consumers' measured windows: ${o.cpuProfDir}`);
    }
    out('');
    for (let run = 1; run <= o.repeat; run++) {
      for (const mode of o.modes) {
        const runRows: Row[] = [];
        for (const variant of variantsOf(o, mode)) {
          // The raw loops do not use the library: one row whatever --otel says.
          const setups = o.otel && !variant.startsWith('raw') ? o.otel : [undefined];
          for (const otel of setups) {
            await waitForQuiet(o.quietS, progress);
            progress(`  run ${run}: ${mode} / ${variant}${otel ? ` / otel ${otel}` : ''} ...`);
            runRows.push(await runOne(redis, redisUrl, o, mode, variant, run, otel));
          }
        }
        relate(runRows);
        rows.push(...runRows);
      }
    }
    const medians = medianRows(rows);
    const cols = columns(o);
    for (const mode of o.modes) {
      const order = (r: Row) =>
        VARIANTS.indexOf(r.variant) * 10 + (r.otel ? OTEL_MODES.indexOf(r.otel) : 0);
      const modeRows = rows
        .filter((r) => r.mode === mode)
        .sort((a, b) => Number(a.run) - Number(b.run) || order(a) - order(b));
      const modeMedians = medians
        .filter((r) => r.mode === mode)
        .sort((a, b) => order(a) - order(b));
      out(`## ${modeLabel(mode, o)}`);
      out(renderTable(cols, [...modeRows, ...modeMedians]));
      out('');
    }
    for (const line of LEGEND) out(line);
    const shared = rows.filter(sharedMachine);
    if (shared.length > 0)
      out(
        `WARNING: ${shared.length} of ${rows.length} rows shared the machine with other processes (others' CPU > ${SHARED_CPU_PCT} %; the targets leave their runs out when other runs are clean): ${shared
          .map((r) => `${r.mode}/${r.variant}/${r.run} ${r.otherCpuPct!.toFixed(0)} %`)
          .join(', ')}`,
      );
    out('');
    out("## Redis time of the consumers' commands (INFO commandstats usec), ms per 100k messages");
    out(renderTable(REDIS_COLUMNS, [...rows, ...medians.filter((r) => r.run === 'median')]));
    if (o.otel) {
      out('');
      out(
        '## OpenTelemetry cost (--otel): each row against the same mode, consumer and run without the API',
      );
      out(renderTable(OTEL_COLUMNS, otelCostRows(rows, medians)));
      out(OTEL_LEGEND);
    }
    // The targets are about the transport as installed (the API, no SDK).
    const targets = evaluateTargets(
      rows.filter((r) => r.otel === undefined || r.otel === 'api'),
      o,
    );
    out('');
    out(`## targets${o.repeat > 1 ? ` (medians of ${o.repeat} runs)` : ''}`);
    out(renderTable(TARGET_COLUMNS, targets));
    const profiled = rows.filter((r) => r.profile);
    if (profiled.length > 0) {
      out('');
      out('## CPU profiles of the measured windows (self time)');
      for (const r of profiled) {
        out('');
        out(formatProfileSummary(summarizeProfile(r.profile!, 15)));
      }
    }
    return { env, revision, rows, medians, targets };
  } finally {
    await redis.quit();
    await own?.stop();
  }
}

async function main(): Promise<void> {
  if (process.argv.includes('--rebalance')) {
    // `npm run bench:ticks -- --rebalance [options]`: ordered partitions while consumers move.
    await (await import('./rebalance')).runRebalanceBench(process.argv.slice(2));
    return;
  }
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
