/*
 * The demo-ticks benchmark: the real demo at 10,000 ticks/s (`npm run bench:ticks -- --demo`, or
 * this file through scripts/with-redis.js, which provides REDIS_URL; --help lists the options).
 * The consumer (apps/demo-ticks/src/main.ts) and the collector (src/collector.main.ts) run as
 * two processes of their own; this process samples the consumer's RSS and /metrics each second.
 */
import { ChildProcess, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { sumMetric } from '../../support/app-process';
import { forkTsProcess, nextMessage, stopProcess } from '../shared/child';
import { startCpuProfile, writeCpuProfile } from '../shared/child';
import { columns } from '../shared/columns';
import { collectEnvInfo, formatEnvInfo } from '../shared/env-info';
import { commandStats, deleteKeys, groupInfo } from '../shared/redis-stats';
import { renderTable } from '../shared/table';
import { DemoTicksBenchOptions, parseDemoTicksArgs } from './options';

const ROOT = join(__dirname, '..', '..');
const INTERVALS = ['1m', '5m', '30m'];
/** Seconds between samples of the consumer's RSS and /metrics. */
const SAMPLE_S = 1;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resident set size of a process in MB (Linux /proc), or NaN elsewhere. */
function rssMb(pid: number): number {
  try {
    return (
      Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024
    );
  } catch {
    return NaN;
  }
}

type Buckets = [number, number][];

/** The counters (summed over labels) and the e2e latency histogram of the consumer's /metrics. */
async function scrape(
  url: string,
): Promise<{ counter: (name: string) => number; latency: Buckets }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const latency = [...text.matchAll(/^tick_e2e_latency_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm)];
  return {
    counter: (name) => sumMetric(text, name, {}),
    latency: latency.map((m) => [m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]),
  };
}

/** Quantile of a cumulative Prometheus histogram, interpolated linearly inside the bucket (ms). */
function histogramQuantile(buckets: Buckets, q: number): number {
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const total = sorted.length ? sorted[sorted.length - 1][1] : 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let [prevBound, prevCount] = [0, 0];
  for (const [bound, count] of sorted) {
    if (count >= rank) {
      if (!Number.isFinite(bound)) return prevBound * 1000;
      const inBucket = count - prevCount;
      const frac = inBucket > 0 ? (rank - prevCount) / inBucket : 1;
      return (prevBound + (bound - prevBound) * frac) * 1000;
    }
    [prevBound, prevCount] = [bound, count];
  }
  return prevBound * 1000;
}

/** Volume and trades summed over the candles of one interval. */
async function candleSums(redis: Redis, prefix: string, interval: string) {
  const sums = { volume: 0, trades: 0 };
  for await (const keys of redis.scanStream({
    match: `${prefix}candle:${interval}:*`,
    count: 1000,
  }))
    for (const [v, n] of await Promise.all(
      (keys as string[]).map((k) => redis.hmget(k, 'v', 'n')),
    )) {
      sums.volume += Number(v);
      sums.trades += Number(n);
    }
  return sums;
}

type CollectorStats = Record<'published' | 'failed' | 'volume' | 'startedAt' | 'endedAt', number>;
type TimelineRow = Record<
  'second' | 'publishedPerS' | 'handledPerS' | 'xackPerS' | 'lag' | 'pending' | 'rssMb',
  number
>;

export async function runDemoTicksBench(o: DemoTicksBenchOptions) {
  const prefix = `bench:demo-ticks:${randomBytes(4).toString('hex')}:`;
  const stream = `${prefix}ticks`;
  if (o.from === 'dist' && !o['no-build']) {
    const run = spawnSync('npm', ['run', 'build'], { cwd: ROOT, encoding: 'utf8' });
    if (run.status !== 0)
      throw new Error(`npm run build failed (${run.status}):\n${run.stdout}${run.stderr}`);
  }
  const [dir, ext] =
    o.from === 'dist'
      ? [join(ROOT, 'dist', 'apps', 'demo-ticks'), 'js']
      : [join(ROOT, 'apps', 'demo-ticks', 'src'), 'ts'];
  const redis = new Redis(o.redisUrl);
  const children: ChildProcess[] = [];
  const durationMs = o.duration * 1000;
  const start = (file: string, env: Record<string, string>, execArgv: string[] = []) => {
    const common = { REDIS_URL: o.redisUrl, TICKS_STREAM: stream, TICKS_KEY_PREFIX: prefix };
    const child = forkTsProcess(join(dir, `${file}.${ext}`), {
      ...{ env: { ...common, LOG_LEVEL: 'warn', ...env }, execArgv },
      ...{ profiled: file === 'main' && o['cpu-prof'] !== undefined },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    children.push(child);
    return child;
  };
  try {
    const packages = ['@nestjs/core', '@nestjs/microservices', 'ioredis', 'prom-client'];
    const env = await collectEnvInfo(redis, o.redisUrl, [...packages, 'typescript']);
    const consumer = start(
      'main',
      { COLLECTOR: 'false', HOST: '127.0.0.1', PORT: '0', TICKS_CONSUMER: 'bench' },
      [
        ...(o['semi-space'] ? [`--max-semi-space-size=${o['semi-space']}`] : []),
        ...(o['old-space'] ? [`--max-old-space-size=${o['old-space']}`] : []),
      ],
    );
    const { url } = await nextMessage<{ url: string }>(consumer, 'the consumer');
    const xacksOf = async () => (await commandStats(redis)).xack?.calls ?? 0;
    const xackServerBefore = await xacksOf();
    const collector = start('collector.main', {
      ...{ COLLECTOR_SYMBOLS: String(o.symbols), COLLECTOR_RATE: String(o.rate) },
      ...{ COLLECTOR_DURATION_MS: String(durationMs), COLLECTOR_SEED: '1' },
    });
    await nextMessage(collector, 'the collector');
    const collectorDone = nextMessage<{ stats: CollectorStats }>(collector, 'the collector');
    const started = Date.now();
    const profile = o['cpu-prof'];
    if (profile) startCpuProfile(consumer);
    const profiled = profile ? collectorDone.then(() => writeCpuProfile(consumer, profile)) : null;
    profiled?.catch(() => undefined);

    // Sample each second until the collector is done and the consumer has caught up.
    const timeline: TimelineRow[] = [];
    let prev = { added: 0, handled: 0, xacks: 0 };
    let stats: CollectorStats | undefined;
    void collectorDone.then((m) => (stats = m.stats));
    let drainedAt: number | null = null;
    let lastHandledAt = started;
    const latencySamples: { elapsed: number; buckets: Buckets }[] = [];
    const deadline = started + durationMs + o['drain-timeout'] * 1000;
    for (let second = 1; ; second++) {
      await sleep(Math.max(0, started + second * SAMPLE_S * 1000 - Date.now()));
      const [m, added, group] = await Promise.all([
        scrape(url),
        redis
          .call('XINFO', 'STREAM', stream)
          .then((info) =>
            Number((info as unknown[])[(info as unknown[]).indexOf('entries-added') + 1] ?? 0),
          )
          .catch(() => 0),
        groupInfo(redis, stream).catch(() => ({}) as Record<string, number>),
      ]);
      const [lag, pending] = [group.lag ?? 0, group.pending ?? 0];
      const handled = m.counter('ticks_handled_total');
      const xacks = m.counter('redis_streams_xack_calls_total');
      if (handled > prev.handled) lastHandledAt = Date.now();
      const rate = (now: number, before: number) => (now - before) / SAMPLE_S;
      timeline.push({
        ...{
          second,
          publishedPerS: rate(added, prev.added),
          handledPerS: rate(handled, prev.handled),
        },
        ...{ xackPerS: rate(xacks, prev.xacks), lag, pending, rssMb: rssMb(consumer.pid!) },
      });
      prev = { added, handled, xacks };
      latencySamples.push({ elapsed: Date.now() - started, buckets: m.latency });
      const dead = m.counter('ticks_dead_lettered_total');
      if (stats && handled + dead >= stats.published && lag === 0 && pending === 0) {
        drainedAt = Date.now();
        break;
      }
      if (Date.now() > deadline) break;
    }
    stats ??= (await collectorDone).stats;
    await profiled;
    const final = await scrape(url);
    const xackServer = (await xacksOf()) - xackServerBefore;
    await stopProcess(consumer);

    const sums: Record<string, { volume: number; trades: number }> = {};
    for (const interval of INTERVALS) sums[interval] = await candleSums(redis, prefix, interval);
    const consumerSeconds = (lastHandledAt - started) / 1000;
    // The transport's XACKs, recorded through OpenTelemetry (redis_streams_xack_*).
    const xackCalls = final.counter('redis_streams_xack_calls_total');
    // "Steady" latency window: the second half of the publishing period (after warm-up, before drain).
    const at = (ms: number) => latencySamples.find((x) => x.elapsed >= ms)?.buckets;
    const [steadyStart, steadyEnd] = [at(durationMs * 0.5), at(durationMs)];
    const before = new Map(steadyStart);
    const steady =
      steadyStart &&
      steadyEnd &&
      steadyEnd.map(([le, c]): [number, number] => [le, c - (before.get(le) ?? 0)]);
    const perInterval = (key: 'volume' | 'trades') =>
      Object.fromEntries(Object.entries(sums).map(([k, v]) => [k, v[key]]));
    const result = {
      ...{ env, options: o, targetRate: o.symbols * o.rate, published: stats.published },
      ...{ publishFailed: stats.failed, publishSeconds: (stats.endedAt - stats.startedAt) / 1000 },
      ...{ handled: final.counter('ticks_handled_total'), consumerSeconds },
      drainedAfterMs: drainedAt === null ? null : drainedAt - (stats.endedAt ?? started),
      // Skipped by the transport (its LRU and Redis records), and by the candle script (the app's).
      duplicatesSkipped:
        final.counter('redis_streams_messages_duplicates_skipped_total') +
        final.counter('ticks_duplicates_skipped_total'),
      deadLettered: final.counter('ticks_dead_lettered_total'),
      e2eP50Ms: histogramQuantile(final.latency, 0.5),
      e2eP99Ms: histogramQuantile(final.latency, 0.99),
      e2eP50SteadyMs: steady ? histogramQuantile(steady, 0.5) : null,
      e2eP99SteadyMs: steady ? histogramQuantile(steady, 0.99) : null,
      xackCalls,
      xackPerSecond: consumerSeconds > 0 ? xackCalls / consumerSeconds : 0,
      xackPerSecondMax: Math.max(0, ...timeline.map((r) => r.xackPerS)),
      serverXackCalls: xackServer,
      meanAckBatch: xackCalls > 0 ? final.counter('redis_streams_xack_ids_sum') / xackCalls : 0,
      rssMaxMb: Math.max(0, ...timeline.map((r) => r.rssMb).filter(Number.isFinite)),
      rssEndMb: timeline.length ? timeline[timeline.length - 1].rssMb : NaN,
      volumePublished: stats.volume,
      ...{ volumeInCandles: perInterval('volume'), tradesInCandles: perInterval('trades') },
      timeline,
    };
    process.stdout.write(`${formatReport(result)}\n`);
    return result;
  } finally {
    for (const child of children) await stopProcess(child, 'SIGKILL');
    if (!o.keep) await deleteKeys(redis, prefix).catch(() => undefined);
    await redis.quit();
  }
}

export type DemoTicksBenchResult = Awaited<ReturnType<typeof runDemoTicksBench>>;

/** Latency in ms; the histogram's last finite bucket is 10 s, so beyond it only a bound is known. */
const ms = (value: number) => (value >= 10_000 ? '>= 10000' : value.toFixed(1));
const n = (x: number) => x.toLocaleString('en-US');
const yes = (ok: boolean) => (ok ? 'yes' : 'NO');

export function formatReport(r: DemoTicksBenchResult): string {
  const o = r.options;
  const allTrades = Object.values(r.tradesInCandles).every((x) => x === r.published);
  const allVolume = Object.values(r.volumeInCandles).every((v) => v === r.volumePublished);
  const exact = r.published === r.handled + r.deadLettered && allTrades && allVolume;
  const perInterval = (m: Record<string, number>) => INTERVALS.map((i) => n(m[i])).join(' / ');
  const publishRate = r.published / r.publishSeconds;
  const consumeRate = r.handled / r.consumerSeconds;
  const steady =
    r.e2eP50SteadyMs === null ? '-' : `${ms(r.e2eP50SteadyMs)} / ${ms(r.e2eP99SteadyMs!)}`;
  const caughtUp =
    r.drainedAfterMs === null
      ? 'not within the drain timeout'
      : `${(r.drainedAfterMs / 1000).toFixed(1)} s`;
  const target = String(r.targetRate);
  // measure, value, and where there is one, the target and whether it was met
  const rows: string[][] = [
    [
      'ticks published (XADD ok) / failed',
      `${n(r.published)} / ${r.publishFailed}`,
      n(r.targetRate * o.duration),
      yes(r.publishFailed === 0),
    ],
    [
      'publish rate (ticks/s)',
      publishRate.toFixed(0),
      target,
      yes(publishRate >= r.targetRate * 0.95),
    ],
    [
      'consume rate (ticks/s, to the last tick)',
      consumeRate.toFixed(0),
      target,
      yes(consumeRate >= r.targetRate * 0.95),
    ],
    ['caught up after the collector stopped', caughtUp],
    [
      'ticks handled / duplicates skipped / dead-lettered',
      `${n(r.handled)} / ${r.duplicatesSkipped} / ${r.deadLettered}`,
    ],
    [
      'trades in candles 1m / 5m / 30m',
      perInterval(r.tradesInCandles),
      '= published',
      yes(allTrades),
    ],
    [
      'volume in candles 1m / 5m / 30m',
      perInterval(r.volumeInCandles),
      `= ${n(r.volumePublished)} published`,
      yes(allVolume),
    ],
    ['no tick lost or double counted', yes(exact), 'yes', yes(exact)],
    ['e2e latency p50 / p99, whole run (ms)', `${ms(r.e2eP50Ms)} / ${ms(r.e2eP99Ms)}`],
    ['e2e latency p50 / p99, 2nd half of publishing (ms)', steady],
    [
      'XACK calls per second (mean / max second)',
      `${r.xackPerSecond.toFixed(1)} / ${r.xackPerSecondMax.toFixed(0)}`,
      '<= 25',
      yes(r.xackPerSecondMax <= 25),
    ],
    ['XACK calls: consumer / whole Redis server', `${r.xackCalls} / ${r.serverXackCalls}`],
    ['ids per XACK (mean)', r.meanAckBatch.toFixed(0)],
    [
      'consumer RSS (max / at the end, MB)',
      `${r.rssMaxMb.toFixed(0)} / ${r.rssEndMb.toFixed(0)}`,
      '< 256',
      yes(r.rssMaxMb < 256),
    ],
  ];
  const summary = renderTable(
    ['measure', 'value', 'target', 'met'].map((header, i) => ({
      header,
      value: (x: string[]) => x[i] ?? '-',
    })),
    rows,
  );
  // Windows of `every` samples: mean rates, the last lag and pending, the highest RSS.
  const every = Math.max(1, Math.round(r.timeline.length / 15));
  const windows: TimelineRow[] = [];
  for (let i = 0; i < r.timeline.length; i += every) {
    const w = r.timeline.slice(i, i + every);
    const last = w[w.length - 1];
    const mean = (k: keyof TimelineRow) => w.reduce((sum, x) => sum + x[k], 0) / w.length;
    const rss = Math.max(...w.map((x) => x.rssMb));
    windows.push({
      ...{
        second: last.second,
        publishedPerS: mean('publishedPerS'),
        handledPerS: mean('handledPerS'),
      },
      ...{ xackPerS: mean('xackPerS'), lag: last.lag, pending: last.pending, rssMb: rss },
    });
  }
  const round = (k: keyof TimelineRow) => (x: TimelineRow) => Math.round(x[k]);
  const timeline = renderTable(
    columns<TimelineRow>(
      'until s=second, published/s, handled/s, XACK/s=xackPerS:1, lag, pending, max RSS MB',
      {
        'published/s': round('publishedPerS'),
        'handled/s': round('handledPerS'),
        'max RSS MB': round('rssMb'),
      },
    ),
    windows,
  );
  const flags = [
    o['old-space'] ? ` --max-old-space-size=${o['old-space']}` : '',
    o['semi-space'] ? ` --max-semi-space-size=${o['semi-space']}` : '',
  ].join('');
  return [
    `demo-ticks benchmark: ${o.symbols} symbols x ${o.rate}/s = ${r.targetRate} ticks/s for ${o.duration} s` +
      (flags ? ` (consumer V8 flags:${flags})` : '') +
      (o.from === 'dist'
        ? '; consumer and collector: the built app (dist)'
        : '; consumer and collector: TypeScript sources through scripts/register-ts.js') +
      (o['cpu-prof'] ? `; CPU profile of the consumer: ${o['cpu-prof']}` : ''),
    formatEnvInfo(r.env),
    '',
    summary,
    '',
    `timeline (means over ${every} samples of ${SAMPLE_S} s):`,
    timeline,
  ].join('\n');
}

export async function main(argv = process.argv.slice(2)): Promise<void> {
  const o = parseDemoTicksArgs(argv);
  const result = await runDemoTicksBench(o);
  if (o.json) {
    writeFileSync(o.json, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(`JSON written to ${o.json}\n`);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`bench demo-ticks failed: ${err?.stack ?? err}\n`);
    process.exit(1);
  });
}
