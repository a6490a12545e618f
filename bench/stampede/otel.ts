/*
 * The otel scenario of `npm run bench:stampede -- --scenario otel`: what the library's
 * OpenTelemetry instrumentation costs on a hot set of cached keys, closed loop (as many calls as
 * the process can make), for three variants in one run: none (telemetry off), api
 * (@opentelemetry/api installed, no SDK: its no-op meter and tracer), sdk (a MeterProvider with
 * the Prometheus exporter, collected once at the end, and a tracer provider with a batch span
 * processor whose exporter drops the spans). Two tiers: `store` (every call a Redis GET, so
 * every call also makes a span with the SDK) and `l1` (`l1: true`, the calls never leave the
 * process: the counters' cost shows most there). Each run is a forked process of its own
 * (otel-worker.ts); rounds rotate the order of the variants, and the table shows medians.
 */
import { fork } from 'node:child_process';
import { join } from 'node:path';
import { Column, renderTable } from '../shared/table';
import type { OtelTier, OtelVariant, OtelWorkerConfig, OtelWorkerReply } from './otel-worker';
import { PrivateRedis } from './private-redis';
import type { ScenarioContext } from './resilience';
import type { BenchReport, Target } from './stampede-bench';

const REGISTER = join(__dirname, '..', '..', 'scripts', 'register-ts.js');
const WORKER = join(__dirname, 'otel-worker.ts');

/** The variants `--otel` accepts; the default run measures the first three. */
export const OTEL_VARIANTS: readonly OtelVariant[] = [
  'none',
  'api',
  'sdk',
  'sdk-sampled',
  'sdk-metrics',
  'sdk-als',
];
export const DEFAULT_OTEL_VARIANTS: readonly OtelVariant[] = ['none', 'api', 'sdk'];
export const OTEL_TIERS: readonly OtelTier[] = ['store', 'l1'];

/** Largest throughput loss against `none` each variant may cost (issue 15). */
const BUDGET: Record<OtelVariant, number | undefined> = {
  none: undefined,
  api: 0.02,
  sdk: 0.1,
  'sdk-sampled': undefined,
  'sdk-metrics': undefined,
  'sdk-als': undefined,
};

export interface OtelRow {
  variant: OtelVariant;
  tier: OtelTier;
  /** Median over the rounds of calls per second. */
  ops_per_s: number;
  /** Each round's calls per second, in round order. */
  rounds: number[];
  /** Median CPU time per call of the process, us. */
  cpu_us: number;
  /** cpu_us / none's cpu_us for the same tier: the cost, less sensitive to a busy machine. */
  cpu_ratio: number | null;
  /** ops_per_s / none's ops_per_s for the same tier. */
  ratio: number | null;
  /** sdk: size of the one Prometheus scrape, and its stampede_* lines. */
  scrape_bytes?: number;
  scrape_series?: number;
}

export const OTEL_COLUMNS: Column<OtelRow>[] = [
  { header: 'variant', value: (r) => r.variant },
  { header: 'tier', value: (r) => r.tier },
  { header: 'calls/s (median)', value: (r) => Math.round(r.ops_per_s) },
  { header: 'rounds', value: (r) => r.rounds.map((n) => Math.round(n)).join(' ') },
  { header: 'cpu us/call', value: (r) => r.cpu_us, digits: 2 },
  { header: 'cpu vs none', value: (r) => r.cpu_ratio, digits: 3 },
  { header: 'vs none', value: (r) => r.ratio, digits: 3 },
  {
    header: 'loss',
    value: (r) => (r.ratio === null ? null : `${((1 - r.ratio) * 100).toFixed(1)} %`),
  },
];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function runWorker(cfg: OtelWorkerConfig): Promise<OtelWorkerReply> {
  return new Promise((resolve, reject) => {
    const child = fork(WORKER, [], {
      execArgv: ['-r', REGISTER],
      env: { ...process.env, OTEL_BENCH: JSON.stringify(cfg) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    let reply: (OtelWorkerReply & { error?: string }) | undefined;
    child.on('message', (msg: OtelWorkerReply & { error?: string }) => (reply = msg));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (reply?.error) reject(new Error(`otel worker (${cfg.variant}): ${reply.error}`));
      else if (!reply) reject(new Error(`otel worker (${cfg.variant}) exited with ${code}`));
      else resolve(reply);
    });
  });
}

export async function otelCost(ctx: ScenarioContext): Promise<OtelRow[]> {
  const o = ctx.opts;
  const variants = o.otelVariants;
  const tiers = o.otelTiers;
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## otel: variants ${variants.join(', ')}, tiers ${tiers.join(', ')}; ${o.otelKeys} keys ` +
      `(zipf ${o.otelZipf}), ${o.otelConcurrency} callers in a closed loop, ${o.otelWarmupMs} ms ` +
      `warm-up + ${o.otelDurationMs} ms per run, ${o.otelRounds} rounds (a forked process per ` +
      `variant and round, order rotated); ${redis.describe()}`,
  );
  const perRound = new Map<string, { ops: number[]; cpu: number[] }>();
  let scrape: OtelWorkerReply['prometheus'];
  try {
    for (let round = 0; round < o.otelRounds; round++) {
      const order = variants.map((_, i) => variants[(i + round) % variants.length]);
      for (const variant of order) {
        const reply = await runWorker({
          variant,
          tiers: [...tiers],
          redisUrl: redis.url,
          prefix: `${ctx.prefix}otel:${variant}:${round}:`,
          keys: o.otelKeys,
          zipf: o.otelZipf,
          concurrency: o.otelConcurrency,
          warmupMs: o.otelWarmupMs,
          durationMs: o.otelDurationMs,
        });
        for (const r of reply.results) {
          const id = `${variant}/${r.tier}`;
          const entry = perRound.get(id) ?? { ops: [], cpu: [] };
          entry.ops.push((r.calls * 1000) / r.ms);
          entry.cpu.push(r.cpuUs);
          perRound.set(id, entry);
        }
        if (reply.prometheus) scrape = reply.prometheus;
        ctx.log(
          `  round ${round + 1} ${variant}: ` +
            reply.results
              .map((r) => `${r.tier} ${Math.round((r.calls * 1000) / r.ms)} calls/s`)
              .join(', '),
        );
      }
    }
  } finally {
    await redis.stop();
  }
  const rows: OtelRow[] = [];
  for (const tier of tiers) {
    const base = perRound.get(`none/${tier}`);
    for (const variant of variants) {
      const m = perRound.get(`${variant}/${tier}`);
      if (!m) continue;
      const ops = median(m.ops);
      rows.push({
        variant,
        tier,
        ops_per_s: ops,
        rounds: m.ops,
        cpu_us: median(m.cpu),
        ratio: base ? ops / median(base.ops) : null,
        cpu_ratio: base ? median(m.cpu) / median(base.cpu) : null,
        ...(variant.startsWith('sdk') && scrape
          ? { scrape_bytes: scrape.bytes, scrape_series: scrape.series }
          : {}),
      });
    }
  }
  ctx.log(renderTable(OTEL_COLUMNS, rows));
  if (scrape) {
    ctx.log(
      `sdk: one Prometheus collection at the end: ${scrape.series} stampede_* lines, ` +
        `${scrape.bytes} bytes, ${scrape.collectMs.toFixed(1)} ms`,
    );
  }
  return rows;
}

const VARIANT_TEXT: Record<OtelVariant, string> = {
  none: 'telemetry off',
  api: 'API without SDK',
  sdk: 'SDK: MeterProvider + Prometheus, tracer + batch processor',
  'sdk-sampled': 'SDK as sdk, 10 % of traces sampled',
  'sdk-metrics': 'SDK: MeterProvider + Prometheus only',
  'sdk-als': 'SDK as sdk + AsyncLocalStorage context manager',
};

export function otelTargets(report: BenchReport): Target[] {
  const targets: Target[] = [];
  for (const row of report.otel ?? []) {
    const budget = BUDGET[row.variant];
    if (budget === undefined || row.ratio === null) continue;
    const loss = 1 - row.ratio;
    targets.push({
      id: `otel-${row.variant}-${row.tier}`,
      text: `${VARIANT_TEXT[row.variant]}, ${row.tier} hits: throughput loss vs telemetry off <= ${budget * 100} %`,
      met: loss <= budget,
      measured:
        `${(loss * 100).toFixed(1)} % (${Math.round(row.ops_per_s)} vs ${Math.round(row.ops_per_s / row.ratio)} calls/s, medians; ` +
        `CPU per call x${row.cpu_ratio?.toFixed(3)})`,
    });
  }
  return targets;
}
