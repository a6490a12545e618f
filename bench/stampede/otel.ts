/*
 * The otel scenario of `npm run bench:stampede -- --scenario otel`: what the library's
 * OpenTelemetry instrumentation costs on a hot set of cached keys, closed loop (as many calls as
 * the process can make), each variant (otel-worker.ts) against telemetry off, on two tiers:
 * `store` (every call a Redis GET, and with the SDK a span) and `l1` (`l1: true`: calls never
 * leave the process). Each round is a forked process in which an app with telemetry off and an
 * app with it on take turns in short slices; the table shows the medians over the rounds.
 */
import { join } from 'node:path';
import { forkTs } from '../shared/child';
import { columns } from '../shared/columns';
import { median } from '../shared/table';
import type { Target } from '../shared/targets';
import type { OtelVariant, OtelWorkerConfig, OtelWorkerReply } from './otel-worker';
import { runScenario, ScenarioContext } from './scenario';

/** Largest throughput loss against telemetry off; others are informative. */
const BUDGET: Partial<Record<OtelVariant, number>> = { api: 0.02, sdk: 0.1 };

const VARIANT_TEXT: Record<OtelVariant, string> = {
  api: 'API without SDK',
  sdk: 'SDK (MeterProvider + Prometheus, tracer + batch processor, every span sampled)',
  'sdk-sampled': 'SDK, 10 % of traces sampled',
  'sdk-metrics': 'SDK MeterProvider + Prometheus alone',
  'sdk-als': 'SDK + AsyncLocalStorage context manager',
};

/** One round in a forked worker: its reply, once it has exited. */
async function runWorker(cfg: OtelWorkerConfig): Promise<OtelWorkerReply> {
  const child = forkTs<{ type: 'result' } & OtelWorkerReply>(
    'otel worker',
    join(__dirname, 'otel-worker.ts'),
    { env: { OTEL_BENCH: JSON.stringify(cfg) } },
  );
  try {
    const reply = await child.waitFor('result', 3_600_000);
    await child.exited;
    return reply;
  } finally {
    await child.kill();
  }
}

const perSecond = (m: { calls: number; ms: number }) => (m.calls * 1000) / m.ms;

/** Medians over the rounds: calls per second off and on, on / off, CPU per call (us). */
function otelRow(variant: OtelVariant, tier: string, results: OtelWorkerReply['results']) {
  const ratios = results.map((r) => perSecond(r.on) / perSecond(r.off));
  return {
    variant,
    tier,
    off_per_s: median(results.map((r) => perSecond(r.off))),
    on_per_s: median(results.map((r) => perSecond(r.on))),
    /** Each round's two apps ran side by side. */
    ratio: median(ratios),
    ratios,
    off_cpu_us: median(results.map((r) => r.off.cpuUs)),
    on_cpu_us: median(results.map((r) => r.on.cpuUs)),
  };
}
export type OtelRow = ReturnType<typeof otelRow>;

export const OTEL_COLUMNS = columns<OtelRow>(
  'variant, tier, off calls/s, on calls/s, on/off=ratio:3, loss, rounds on/off, ' +
    'cpu us/call off=off_cpu_us:2, on=on_cpu_us:2',
  {
    'off calls/s': (r) => Math.round(r.off_per_s),
    'on calls/s': (r) => Math.round(r.on_per_s),
    loss: (r) => `${((1 - r.ratio) * 100).toFixed(1)} %`,
    'rounds on/off': (r) => r.ratios.map((x) => x.toFixed(3)).join(' '),
  },
);

export function otelCost(ctx: ScenarioContext) {
  const o = ctx.opts;
  const variants = o.otelVariants.filter((v): v is OtelVariant => v !== 'none');
  let scrape: OtelWorkerReply['prometheus'];
  return runScenario(ctx, {
    privateRedis: true,
    title: (redis) =>
      `otel: variants ${variants.join(', ')} against telemetry off, tiers ${o.otelTiers.join(', ')}; ` +
      `${o.otelKeys} keys (zipf ${o.otelZipf}), ${o.otelConcurrency} callers in a closed loop; ` +
      `per app ${o.otelWarmupMs} ms warm-up + ${o.otelDurationMs} ms, in turns of ` +
      `${o.otelSliceMs} ms with its telemetry-off twin; ${o.otelRounds} rounds (a forked ` +
      `process each); ${redis.describe()}`,
    rows: async (redis) => {
      const byRow = new Map<string, OtelWorkerReply['results']>();
      for (let round = 0; round < o.otelRounds; round++) {
        const reply = await runWorker({
          variants: variants.map((_, i) => variants[(i + round) % variants.length]),
          tiers: [...o.otelTiers],
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
      return variants.flatMap((variant) =>
        o.otelTiers.flatMap((tier) => {
          const results = byRow.get(`${variant}/${tier}`) ?? [];
          return results.length ? [otelRow(variant, tier, results)] : [];
        }),
      );
    },
    columns: OTEL_COLUMNS,
    after: () =>
      scrape
        ? [
            `sdk: one Prometheus collection at the end of a phase: ${scrape.series} stampede_* lines, ` +
              `${scrape.bytes} bytes, ${scrape.collectMs.toFixed(1)} ms`,
          ]
        : [],
    targets: otelTargets,
    targetsAt: 'list',
  });
}

function otelTargets(rows: OtelRow[]): Target[] {
  return rows.flatMap((row) => {
    const budget = BUDGET[row.variant];
    if (budget === undefined) return [];
    const loss = 1 - row.ratio;
    return [
      {
        id: `otel-${row.variant}-${row.tier}`,
        text: `${VARIANT_TEXT[row.variant]}, ${row.tier} hits: throughput loss vs telemetry off <= ${budget * 100} %`,
        met: loss <= budget,
        measured:
          `${(loss * 100).toFixed(1)} % (median of ${row.ratios.length} rounds of side-by-side ` +
          `turns; CPU per call ${row.off_cpu_us.toFixed(2)} -> ${row.on_cpu_us.toFixed(2)} us)`,
      },
    ];
  });
}
