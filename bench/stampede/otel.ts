/*
 * The otel scenario of `npm run bench:stampede -- --scenario otel`: what the library's
 * OpenTelemetry instrumentation costs on a hot set of cached keys, closed loop (as many calls as
 * the process can make). Telemetry off is the baseline of every variant: api (@opentelemetry/api
 * installed, no SDK: its no-op meter and tracer) and sdk (a MeterProvider with the Prometheus
 * exporter, collected once at the end, and a tracer provider with a batch span processor whose
 * exporter drops the spans), and optionally sdk-sampled, sdk-metrics, sdk-als (otel-worker.ts).
 * Two tiers: `store` (every call a Redis GET, and with the SDK a span) and `l1` (`l1: true`:
 * calls never leave the process). Each round is a forked process (otel-worker.ts) in which an
 * app with telemetry off and an app with it on take turns in short slices; the table shows the
 * medians over the rounds.
 */
import { join } from 'node:path';
import { forkTs } from '../shared/child';
import { Column, median, renderTable } from '../shared/table';
import type { OtelTier, OtelVariant, OtelWorkerConfig, OtelWorkerReply } from './otel-worker';
import { PrivateRedis } from '../shared/private-redis';
import type { ScenarioContext } from './context';
import type { Target } from '../shared/targets';

const WORKER = join(__dirname, 'otel-worker.ts');

/** Largest throughput loss against telemetry off; others are informative. */
const BUDGET: Partial<Record<OtelVariant, number>> = { api: 0.02, sdk: 0.1 };

const VARIANT_TEXT: Record<OtelVariant, string> = {
  api: 'API without SDK',
  sdk: 'SDK (MeterProvider + Prometheus, tracer + batch processor, every span sampled)',
  'sdk-sampled': 'SDK, 10 % of traces sampled',
  'sdk-metrics': 'SDK MeterProvider + Prometheus alone',
  'sdk-als': 'SDK + AsyncLocalStorage context manager',
};

export interface OtelRow {
  variant: OtelVariant;
  tier: OtelTier;
  /** Medians over the rounds of calls per second, telemetry off and on. */
  off_per_s: number;
  on_per_s: number;
  /** Median over the rounds of on / off (each round's two apps ran side by side). */
  ratio: number;
  /** Each round's ratio. */
  ratios: number[];
  /** Median CPU time per call, us, off and on. */
  off_cpu_us: number;
  on_cpu_us: number;
}

export const OTEL_COLUMNS: Column<OtelRow>[] = [
  { header: 'variant', value: (r) => r.variant },
  { header: 'tier', value: (r) => r.tier },
  { header: 'off calls/s', value: (r) => Math.round(r.off_per_s) },
  { header: 'on calls/s', value: (r) => Math.round(r.on_per_s) },
  { header: 'on/off', value: (r) => r.ratio, digits: 3 },
  { header: 'loss', value: (r) => `${((1 - r.ratio) * 100).toFixed(1)} %` },
  { header: 'rounds on/off', value: (r) => r.ratios.map((x) => x.toFixed(3)).join(' ') },
  { header: 'cpu us/call off', value: (r) => r.off_cpu_us, digits: 2 },
  { header: 'on', value: (r) => r.on_cpu_us, digits: 2 },
];

/** One round in a forked worker: its reply, once it has exited. */
async function runWorker(cfg: OtelWorkerConfig): Promise<OtelWorkerReply> {
  const child = forkTs<{ type: 'result' } & OtelWorkerReply>('otel worker', WORKER, {
    env: { OTEL_BENCH: JSON.stringify(cfg) },
  });
  try {
    const reply = await child.waitFor('result', 3_600_000);
    await child.exited;
    return reply;
  } finally {
    await child.kill();
  }
}

export async function otelCost(ctx: ScenarioContext): Promise<OtelRow[]> {
  const o = ctx.opts;
  const variants = o.otelVariants.filter((v): v is OtelVariant => v !== 'none');
  const tiers = o.otelTiers;
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## otel: variants ${variants.join(', ')} against telemetry off, tiers ${tiers.join(', ')}; ` +
      `${o.otelKeys} keys (zipf ${o.otelZipf}), ${o.otelConcurrency} callers in a closed loop; ` +
      `per app ${o.otelWarmupMs} ms warm-up + ${o.otelDurationMs} ms, in turns of ` +
      `${o.otelSliceMs} ms with its telemetry-off twin; ${o.otelRounds} rounds (a forked ` +
      `process each); ${redis.describe()}`,
  );
  const byRow = new Map<string, OtelWorkerReply['results']>();
  let scrape: OtelWorkerReply['prometheus'];
  try {
    for (let round = 0; round < o.otelRounds; round++) {
      const order = variants.map((_, i) => variants[(i + round) % variants.length]);
      const reply = await runWorker({
        variants: order,
        tiers: [...tiers],
        redisUrl: redis.url,
        prefix: `${ctx.prefix}otel:${round}:`,
        keys: o.otelKeys,
        zipf: o.otelZipf,
        concurrency: o.otelConcurrency,
        warmupMs: o.otelWarmupMs,
        durationMs: o.otelDurationMs,
        sliceMs: o.otelSliceMs,
      });
      for (const r of reply.results) {
        const id = `${r.variant}/${r.tier}`;
        byRow.set(id, [...(byRow.get(id) ?? []), r]);
        ctx.log(
          `  round ${round + 1} ${r.variant} ${r.tier}: off ${Math.round(perSecond(r.off))} ` +
            `calls/s, on ${Math.round(perSecond(r.on))} calls/s ` +
            `(${(perSecond(r.on) / perSecond(r.off)).toFixed(3)})`,
        );
      }
      scrape = reply.prometheus ?? scrape;
    }
  } finally {
    await redis.stop();
  }
  const rows: OtelRow[] = [];
  for (const variant of variants) {
    for (const tier of tiers) {
      const results = byRow.get(`${variant}/${tier}`) ?? [];
      if (results.length === 0) continue;
      const ratios = results.map((r) => perSecond(r.on) / perSecond(r.off));
      rows.push({
        variant,
        tier,
        off_per_s: median(results.map((r) => perSecond(r.off))),
        on_per_s: median(results.map((r) => perSecond(r.on))),
        ratio: median(ratios),
        ratios,
        off_cpu_us: median(results.map((r) => r.off.cpuUs)),
        on_cpu_us: median(results.map((r) => r.on.cpuUs)),
      });
    }
  }
  ctx.log(renderTable(OTEL_COLUMNS, rows));
  if (scrape) {
    ctx.log(
      `sdk: one Prometheus collection at the end of a phase: ${scrape.series} stampede_* lines, ` +
        `${scrape.bytes} bytes, ${scrape.collectMs.toFixed(1)} ms`,
    );
  }
  return rows;
}

function perSecond(m: { calls: number; ms: number }): number {
  return (m.calls * 1000) / m.ms;
}

export function otelTargets(rows: OtelRow[]): Target[] {
  const targets: Target[] = [];
  for (const row of rows) {
    const budget = BUDGET[row.variant];
    if (budget === undefined) continue;
    const loss = 1 - row.ratio;
    targets.push({
      id: `otel-${row.variant}-${row.tier}`,
      text: `${VARIANT_TEXT[row.variant]}, ${row.tier} hits: throughput loss vs telemetry off <= ${budget * 100} %`,
      met: loss <= budget,
      measured:
        `${(loss * 100).toFixed(1)} % (median of ${row.ratios.length} rounds of side-by-side ` +
        `turns; CPU per call ${row.off_cpu_us.toFixed(2)} -> ${row.on_cpu_us.toFixed(2)} us)`,
    });
  }
  return targets;
}
