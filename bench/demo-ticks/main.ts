/*
 * The demo-ticks benchmark (not a test): the real demo at 10,000 ticks/s.
 *   node -r ./scripts/register-ts.js bench/demo-ticks/main.ts [options]
 *   (or through scripts/with-redis.js, which provides REDIS_URL)
 *
 *   (--help lists the options: bench/demo-ticks/options.ts)
 *
 * The consumer (apps/demo-ticks/src/main.ts) and the collector (src/collector.main.ts) run as
 * two processes of their own; this process samples the consumer's RSS and /metrics each second.
 */
import { ChildProcess, fork, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { collectEnvInfo } from '../shared/env-info';
import { commandStats, deleteKeys } from '../shared/redis-stats';
import { DEFAULT_OPTIONS, DemoTicksBenchOptions, parseDemoTicksArgs } from './options';
import { DemoTicksBenchResult, formatReport, TimelineRow } from './report';
import { REGISTER_TS } from '../shared/child';

const ROOT = join(__dirname, '..', '..');
const SOURCES = join(ROOT, 'apps', 'demo-ticks', 'src');
/** Where `npm run build` puts the app. */
const BUILT = join(ROOT, 'dist', 'apps', 'demo-ticks');
const PROFILED = join(__dirname, 'cpu-profiled.js');

function entries(from: 'dist' | 'src'): { consumer: string; collector: string } {
  return from === 'dist'
    ? { consumer: join(BUILT, 'main.js'), collector: join(BUILT, 'collector.main.js') }
    : { consumer: join(SOURCES, 'main.ts'), collector: join(SOURCES, 'collector.main.ts') };
}

/** Builds the packages and the apps (`npm run build`); throws with its output when it fails. */
export function buildDemoTicks(): void {
  const run = spawnSync('npm', ['run', 'build'], { cwd: ROOT, encoding: 'utf8' });
  if (run.status !== 0)
    throw new Error(`npm run build failed (${run.status}):\n${run.stdout}${run.stderr}`);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function startChild(
  file: string,
  env: Record<string, string>,
  execArgv: string[] = [],
  profiled = false,
): ChildProcess {
  const ts = file.endsWith('.ts');
  return fork(profiled ? PROFILED : file, profiled ? [file] : [], {
    execArgv: [...execArgv, ...(ts ? ['-r', REGISTER_TS] : [])],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
}

function nextMessage<T>(child: ChildProcess, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) =>
      reject(new Error(`${what} exited (${code}) before answering`));
    child.once('exit', onExit);
    child.once('message', (msg: T) => {
      child.off('exit', onExit);
      resolve(msg);
    });
  });
}

function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}

/** Resident set size of a process in MB (Linux /proc), or NaN elsewhere. */
function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

interface Scrape {
  counters: Map<string, number>;
  latencyBuckets: [number, number][];
}

async function scrape(url: string): Promise<Scrape> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const counters = new Map<string, number>();
  const latencyBuckets: [number, number][] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    const name = line.slice(0, line.lastIndexOf(' '));
    const bucket = /^tick_e2e_latency_seconds_bucket\{le="([^"]+)"\}$/.exec(name);
    if (bucket) latencyBuckets.push([bucket[1] === '+Inf' ? Infinity : Number(bucket[1]), value]);
    else
      counters.set(
        name.replace(/\{.*\}$/, ''),
        (counters.get(name.replace(/\{.*\}$/, '')) ?? 0) + value,
      );
  }
  return { counters, latencyBuckets };
}

/** Quantile of a cumulative Prometheus histogram, interpolated linearly inside the bucket (ms). */
export function histogramQuantile(buckets: [number, number][], q: number): number {
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const total = sorted.length ? sorted[sorted.length - 1][1] : 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let prevBound = 0;
  let prevCount = 0;
  for (const [bound, count] of sorted) {
    if (count >= rank) {
      if (!Number.isFinite(bound)) return prevBound * 1000;
      const inBucket = count - prevCount;
      const frac = inBucket > 0 ? (rank - prevCount) / inBucket : 1;
      return (prevBound + (bound - prevBound) * frac) * 1000;
    }
    prevBound = bound;
    prevCount = count;
  }
  return prevBound * 1000;
}

function bucketDiff(a: [number, number][], b: [number, number][]): [number, number][] {
  const before = new Map(b);
  return a.map(([le, c]) => [le, c - (before.get(le) ?? 0)]);
}

async function groupInfo(redis: Redis, stream: string): Promise<{ lag: number; pending: number }> {
  try {
    const groups = (await redis.call('XINFO', 'GROUPS', stream)) as unknown[][];
    const g = groups[0] ?? [];
    const field = (k: string) => Number(g[g.indexOf(k) + 1] ?? 0);
    return { lag: field('lag'), pending: field('pending') };
  } catch {
    return { lag: 0, pending: 0 };
  }
}

async function entriesAdded(redis: Redis, stream: string): Promise<number> {
  try {
    const info = (await redis.call('XINFO', 'STREAM', stream)) as unknown[];
    return Number(info[info.indexOf('entries-added') + 1] ?? 0);
  } catch {
    return 0;
  }
}

async function serverXacks(redis: Redis): Promise<number> {
  return (await commandStats(redis)).xack?.calls ?? 0;
}

async function candleSums(
  redis: Redis,
  prefix: string,
  interval: string,
): Promise<{ volume: number; trades: number }> {
  let cursor = '0';
  let volume = 0;
  let trades = 0;
  do {
    const [next, keys] = await redis.scan(
      cursor,
      'MATCH',
      `${prefix}candle:${interval}:*`,
      'COUNT',
      1000,
    );
    cursor = next;
    if (keys.length === 0) continue;
    const pipeline = redis.pipeline();
    for (const k of keys) pipeline.hmget(k, 'v', 'n');
    for (const [err, reply] of (await pipeline.exec()) ?? []) {
      if (err) throw err;
      const [v, n] = reply as [string, string];
      volume += Number(v);
      trades += Number(n);
    }
  } while (cursor !== '0');
  return { volume, trades };
}

// ---------------------------------------------------------------- the run

export async function runDemoTicksBench(
  partial: Partial<DemoTicksBenchOptions> = {},
): Promise<DemoTicksBenchResult> {
  const options = { ...DEFAULT_OPTIONS, ...partial };
  const prefix = `bench:demo-ticks:${randomBytes(4).toString('hex')}:`;
  const stream = `${prefix}ticks`;
  if (options.from === 'dist' && options.build) buildDemoTicks();
  const files = entries(options.from);
  const redis = new Redis(options.redisUrl);
  const children: ChildProcess[] = [];
  try {
    const env = await collectEnvInfo(redis, options.redisUrl, [
      '@nestjs/core',
      '@nestjs/microservices',
      'ioredis',
      'prom-client',
      'typescript',
    ]);
    const common = {
      REDIS_URL: options.redisUrl,
      TICKS_STREAM: stream,
      TICKS_KEY_PREFIX: prefix,
      LOG_LEVEL: 'warn',
    };
    const consumer = startChild(
      files.consumer,
      { ...common, COLLECTOR: 'false', HOST: '127.0.0.1', PORT: '0', TICKS_CONSUMER: 'bench' },
      [
        ...(options.semiSpaceMb > 0 ? [`--max-semi-space-size=${options.semiSpaceMb}`] : []),
        ...(options.oldSpaceMb > 0 ? [`--max-old-space-size=${options.oldSpaceMb}`] : []),
      ],
      options.cpuProfile !== undefined,
    );
    children.push(consumer);
    const { url } = await nextMessage<{ url: string }>(consumer, 'the consumer');
    const pid = consumer.pid!;

    const xackServerBefore = await serverXacks(redis);
    const targetRate = options.symbols * options.ratePerSymbol;
    const collector = startChild(files.collector, {
      ...common,
      COLLECTOR_SYMBOLS: String(options.symbols),
      COLLECTOR_RATE: String(options.ratePerSymbol),
      COLLECTOR_DURATION_MS: String(options.durationMs),
      COLLECTOR_SEED: '1',
    });
    children.push(collector);
    await nextMessage<{ started: boolean }>(collector, 'the collector');
    const collectorDone = nextMessage<{
      stats: {
        published: number;
        failed: number;
        volume: number;
        startedAt: number;
        endedAt: number;
      };
    }>(collector, 'the collector');
    const started = Date.now();
    if (options.cpuProfile) consumer.send({ cpuProfileStart: true });
    const profiled =
      options.cpuProfile === undefined
        ? undefined
        : collectorDone.then(async () => {
            const written = nextMessage<{ cpuProfileWritten?: string; cpuProfileError?: string }>(
              consumer,
              'the consumer',
            );
            consumer.send({ cpuProfile: options.cpuProfile });
            const reply = await written;
            if (reply.cpuProfileError) throw new Error(reply.cpuProfileError);
          });
    profiled?.catch(() => undefined);

    // Sample each second until the collector is done and the consumer has caught up.
    const timeline: TimelineRow[] = [];
    let prev = { added: 0, handled: 0, xacks: 0 };
    let stats: Awaited<typeof collectorDone>['stats'] | undefined;
    void collectorDone.then((m) => (stats = m.stats));
    let drainedAt: number | null = null;
    let lastHandledAt = started;
    const latencySamples: { elapsed: number; buckets: [number, number][] }[] = [];
    const deadline = started + options.durationMs + options.drainTimeoutMs;
    for (let second = 1; ; second++) {
      await sleep(Math.max(0, started + second * options.sampleMs - Date.now()));
      const [m, added, group] = await Promise.all([
        scrape(url),
        entriesAdded(redis, stream),
        groupInfo(redis, stream),
      ]);
      const handled = m.counters.get('ticks_handled_total') ?? 0;
      const xacks = m.counters.get('redis_streams_xack_calls_total') ?? 0;
      if (handled > prev.handled) lastHandledAt = Date.now();
      const secs = options.sampleMs / 1000;
      timeline.push({
        second,
        publishedPerS: (added - prev.added) / secs,
        handledPerS: (handled - prev.handled) / secs,
        xackPerS: (xacks - prev.xacks) / secs,
        lag: group.lag,
        pending: group.pending,
        rssMb: rssMb(pid),
      });
      prev = { added, handled, xacks };
      latencySamples.push({ elapsed: Date.now() - started, buckets: m.latencyBuckets });
      if (
        stats &&
        handled + (m.counters.get('ticks_dead_lettered_total') ?? 0) >= stats.published &&
        group.lag === 0 &&
        group.pending === 0
      ) {
        drainedAt = Date.now();
        break;
      }
      if (Date.now() > deadline) break;
    }
    if (!stats) stats = (await collectorDone).stats;
    await profiled;
    const final = await scrape(url);
    const xackServer = (await serverXacks(redis)) - xackServerBefore;
    await stopChild(consumer);

    const sums: Record<string, { volume: number; trades: number }> = {};
    for (const interval of ['1m', '5m', '30m'])
      sums[interval] = await candleSums(redis, prefix, interval);
    const consumerSeconds = (lastHandledAt - started) / 1000;
    // The transport's XACKs, recorded through OpenTelemetry (redis_streams_xack_*).
    const xackCalls = final.counters.get('redis_streams_xack_calls_total') ?? 0;
    // "Steady" latency window: the second half of the publishing period (after warm-up, before drain).
    const at = (ms: number) => latencySamples.find((x) => x.elapsed >= ms)?.buckets;
    const steadyStart = at(options.durationMs * 0.5);
    const steadyEnd = at(options.durationMs);
    const steady = steadyStart && steadyEnd ? bucketDiff(steadyEnd, steadyStart) : undefined;
    const result: DemoTicksBenchResult = {
      env,
      options,
      targetRate,
      published: stats.published,
      publishFailed: stats.failed,
      publishSeconds: (stats.endedAt - stats.startedAt) / 1000,
      handled: final.counters.get('ticks_handled_total') ?? 0,
      consumerSeconds,
      drainedAfterMs: drainedAt === null ? null : drainedAt - (stats.endedAt ?? started),
      // Skipped by the transport (its LRU and Redis records), and by the candle script (the app's).
      duplicatesSkipped:
        (final.counters.get('redis_streams_messages_duplicates_skipped_total') ?? 0) +
        (final.counters.get('ticks_duplicates_skipped_total') ?? 0),
      deadLettered: final.counters.get('ticks_dead_lettered_total') ?? 0,
      e2eP50Ms: histogramQuantile(final.latencyBuckets, 0.5),
      e2eP99Ms: histogramQuantile(final.latencyBuckets, 0.99),
      e2eP50SteadyMs: steady ? histogramQuantile(steady, 0.5) : null,
      e2eP99SteadyMs: steady ? histogramQuantile(steady, 0.99) : null,
      xackCalls,
      xackPerSecond: consumerSeconds > 0 ? xackCalls / consumerSeconds : 0,
      xackPerSecondMax: Math.max(0, ...timeline.map((r) => r.xackPerS)),
      serverXackCalls: xackServer,
      meanAckBatch:
        xackCalls > 0 ? (final.counters.get('redis_streams_xack_ids_sum') ?? 0) / xackCalls : 0,
      rssMaxMb: Math.max(0, ...timeline.map((r) => r.rssMb).filter(Number.isFinite)),
      rssEndMb: timeline.length ? timeline[timeline.length - 1].rssMb : NaN,
      volumePublished: stats.volume,
      volumeInCandles: Object.fromEntries(Object.entries(sums).map(([k, v]) => [k, v.volume])),
      tradesInCandles: Object.fromEntries(Object.entries(sums).map(([k, v]) => [k, v.trades])),
      timeline,
    };
    if (options.print) process.stdout.write(`${formatReport(result)}\n`);
    return result;
  } finally {
    for (const child of children) await stopChild(child, 'SIGKILL');
    if (!options.keep) await deleteKeys(redis, prefix).catch(() => undefined);
    await redis.quit();
  }
}

async function main(): Promise<void> {
  const { options, json } = parseDemoTicksArgs(process.argv.slice(2));
  const result = await runDemoTicksBench(options);
  if (json) {
    writeFileSync(json, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`JSON written to ${json}\n`);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`bench demo-ticks failed: ${err?.stack ?? err}\n`);
    process.exit(1);
  });
}
