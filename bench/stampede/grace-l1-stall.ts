/*
 * The grace-failing (`@Cacheable({ grace })` while the loader fails) and l1-stall (Redis paused
 * under apps with and without the library's L1) scenarios of bench:stampede, on a private
 * redis-server.
 */
import { PrivateRedis } from '../shared/private-redis';
import { Column, renderTable } from '../shared/table';
import type { Target } from '../shared/targets';
import { BenchApp } from './bench-app';
import { PatternName } from './patterns';
import { epochNow, logTargets, q, round2, ScenarioContext, sleep } from './context';
import { LoadJob, runLoad } from './load';
import { parseVariant } from './options';

// --- grace-failing ------------------------------------------------------------------------

export interface GraceRow {
  pattern: PatternName;
  /** ms of grace (0: none). */
  grace_ms: number;
  keys: number;
  rate: number;
  ttl_ms: number;
  duration_ms: number;
  fail_rate: number;
  reqs: number;
  loads: number;
  /** Loads that threw during the measured run (the injected failures). */
  failures: number;
  /** Calls that rejected: the errors that reached callers. */
  caller_errors: number;
  errors_per_failure: number;
  stale_serves: number;
  fail_safes: number;
  p50: number;
  p99: number;
  store_errors: number;
}

export const GRACE_COLUMNS: Column<GraceRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'grace', value: (r) => (r.grace_ms ? `${r.grace_ms} ms` : 'none') },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads', value: (r) => r.loads },
  { header: 'injected_failures', value: (r) => r.failures },
  { header: 'caller_errors', value: (r) => r.caller_errors },
  { header: 'errors/failure', value: (r) => r.errors_per_failure, digits: 3 },
  { header: 'stale_serves', value: (r) => r.stale_serves },
  { header: 'fail_safes', value: (r) => r.fail_safes },
  { header: 'p50_ms', value: (r) => r.p50, digits: 2 },
  { header: 'p99_ms', value: (r) => r.p99, digits: 2 },
  { header: 'store_err', value: (r) => r.store_errors },
];

const GRACE_PATTERNS: PatternName[] = ['two-tier-grace'];

export async function graceFailing(ctx: ScenarioContext): Promise<GraceRow[]> {
  const o = ctx.opts;
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## grace-failing: ${redis.describe()}; loader failing ${(o.graceFailRate * 100).toFixed(0)} % of the time (random), ` +
      `Poisson ${o.graceRate} req/s over ${o.graceKeys} keys (uniform), TTL ${o.graceTtlMs} ms, backend ${o.backendMs} ms, ` +
      `${o.graceDurationMs} ms measured after every key was loaded; two-tier-grace = two-tier + grace ${o.graceMs} ms, ` +
      `graceBackoff ${o.graceBackoffMs} ms; one fresh app (1 process) per pattern`,
  );
  const rows: GraceRow[] = [];
  try {
    for (const pattern of o.gracePatterns) {
      const app = await BenchApp.create(
        ctx.config(o.graceTtlMs, {
          redisUrl: redis.url,
          failRate: o.graceFailRate,
          graceMs: o.graceMs,
          graceBackoffMs: o.graceBackoffMs,
          operationTimeout: o.operationTimeoutMs,
          cooldown: o.cooldownMs,
        }),
      );
      try {
        const job: LoadJob = {
          pattern,
          keyPrefix: `grace:${pattern}:`,
          keys: o.graceKeys,
          zipf: 0,
          mode: 'poisson',
          rate: o.graceRate,
          durationMs: o.graceDurationMs,
        };
        // Warm-up, not counted: every key loaded, one after the other over a TTL (expiries
        // spread), then each once more (a key whose first load failed is loaded now).
        await runLoad(app, { ...job, mode: 'sweep', spreadMs: o.graceTtlMs });
        await runLoad(app, { ...job, mode: 'sweep', concurrency: 20 });
        const f0 = app.backend.failures;
        const res = await runLoad(app, { ...job, perRequest: true });
        await sleep(o.backendMs + 100); // background refreshes started at the end finish
        const failures = app.backend.failures - f0;
        const latencies = res.latencies ?? [];
        rows.push({
          pattern,
          grace_ms: GRACE_PATTERNS.includes(pattern) ? o.graceMs : 0,
          keys: o.graceKeys,
          rate: o.graceRate,
          ttl_ms: o.graceTtlMs,
          duration_ms: o.graceDurationMs,
          fail_rate: o.graceFailRate,
          reqs: res.reqs,
          loads: res.counters.loads,
          failures,
          caller_errors: res.callerErrors,
          errors_per_failure: failures ? res.callerErrors / failures : 0,
          stale_serves: res.counters.staleServes,
          fail_safes: res.counters.failSafes,
          p50: q(latencies, 0.5),
          p99: q(latencies, 0.99),
          store_errors: res.counters.storeErrors,
        });
      } finally {
        await app.close();
      }
    }
  } finally {
    await redis.stop();
  }
  ctx.log(renderTable(GRACE_COLUMNS, rows));
  logTargets(ctx, graceTargets(rows));
  return rows;
}

export function graceTargets(rows: GraceRow[]): Target[] {
  const without = rows.filter((r) => r.grace_ms === 0);
  const ref = without.length
    ? ` (${without.map((r) => `${r.pattern} without grace: ${r.caller_errors} for ${r.failures} = ${r.errors_per_failure.toFixed(2)} per failure`).join('; ')})`
    : '';
  return rows
    .filter((r) => r.grace_ms > 0)
    .map((r) => ({
      id: 'grace-failing',
      text: `${r.pattern}: errors reaching callers <= 1% of the injected loader failures`,
      met: r.caller_errors <= 0.01 * r.failures,
      measured:
        `${r.caller_errors} for ${r.failures} failures (${(100 * r.errors_per_failure).toFixed(2)}%), ` +
        `${r.fail_safes} fail-safes, ${r.stale_serves} stale serves${ref}`,
    }));
}

// --- l1-stall -----------------------------------------------------------------------------

export interface L1StallRow {
  variant: string;
  pattern: PatternName;
  l1: boolean;
  pause_ms: number;
  keys: number;
  rate: number;
  ttl_ms: number;
  reqs: number;
  /** Loader calls before the pause (the normal rate) and during it. */
  loads_before: number;
  loads_per_s_before: number;
  loads_during: number;
  loads_per_s_during: number;
  /** Loads during the pause beyond the normal rate (normal rate x pause, rounded up). */
  excess_loads: number;
  during_reqs: number;
  during_p50: number;
  during_p99: number;
  during_max: number;
  before_p99: number;
  l1_hits: number;
  store_errors: number;
}

export const L1_STALL_COLUMNS: Column<L1StallRow>[] = [
  { header: 'variant', value: (r) => r.variant },
  { header: 'pause', value: (r) => `ALL ${r.pause_ms} ms` },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads_before', value: (r) => r.loads_before },
  { header: 'loads/s_before', value: (r) => r.loads_per_s_before, digits: 1 },
  { header: 'loads_during', value: (r) => r.loads_during },
  { header: 'loads/s_during', value: (r) => r.loads_per_s_during, digits: 1 },
  { header: 'excess_loads', value: (r) => r.excess_loads },
  { header: 'reqs_during', value: (r) => r.during_reqs },
  { header: 'p50_during_ms', value: (r) => r.during_p50, digits: 2 },
  { header: 'p99_during_ms', value: (r) => r.during_p99, digits: 2 },
  { header: 'max_during_ms', value: (r) => r.during_max, digits: 2 },
  { header: 'p99_before_ms', value: (r) => r.before_p99, digits: 2 },
  { header: 'l1_hits', value: (r) => r.l1_hits },
  { header: 'store_err', value: (r) => r.store_errors },
];

export async function l1Stall(ctx: ScenarioContext): Promise<L1StallRow[]> {
  const o = ctx.opts;
  const variants = o.l1StallVariants.map(parseVariant);
  const pauseAt = Math.max(0, (o.l1StallDurationMs - o.l1StallPauseMs) / 2);
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## l1-stall: ${redis.describe()}; ${o.l1StallKeys} keys loaded first (Redis and L1 warm), then Poisson ${o.l1StallRate} req/s over them (uniform), ` +
      `TTL ${o.l1StallTtlMs} ms (fresh through the run), backend ${o.backendMs} ms, ${o.l1StallDurationMs} ms with CLIENT PAUSE ${o.l1StallPauseMs} ALL at ${pauseAt} ms; ` +
      `operationTimeout ${o.operationTimeoutMs} ms, cooldown ${o.cooldownMs} ms; one fresh app (1 process) per variant, +l1 = StampedeModule l1: true`,
  );
  const rows: L1StallRow[] = [];
  try {
    for (const v of variants) {
      const app = await BenchApp.create(
        ctx.config(o.l1StallTtlMs, {
          redisUrl: redis.url,
          recordLoads: true,
          operationTimeout: o.operationTimeoutMs,
          cooldown: o.cooldownMs,
          moduleOptions: v.l1 ? { l1: true } : undefined,
        }),
      );
      try {
        const job: LoadJob = {
          pattern: v.pattern,
          keyPrefix: `l1st:${v.name}:`,
          keys: o.l1StallKeys,
          zipf: 0,
          mode: 'poisson',
          rate: o.l1StallRate,
          durationMs: o.l1StallDurationMs,
        };
        await runLoad(app, { ...job, mode: 'sweep', concurrency: 20 }); // every key loaded
        let pauseStart = Infinity;
        const res = await runLoad(app, { ...job, perRequest: true }, [
          {
            atMs: pauseAt,
            run: () => {
              pauseStart = epochNow();
              redis.pause(o.l1StallPauseMs, 'ALL').catch(() => undefined);
            },
          },
        ]);
        const pauseEnd = pauseStart + o.l1StallPauseMs;
        const count = (from: number, to: number) =>
          res.loads.filter(([, at]) => at >= from && at < to).length;
        const perS = (n: number, from: number, to: number) =>
          n / Math.max(1e-9, (to - from) / 1000);
        const before = count(res.startedAt, pauseStart);
        const during = count(pauseStart, pauseEnd);
        const beforeRate = perS(before, res.startedAt, pauseStart);
        const lat = (from: number, to: number) =>
          res.latencies!.filter((_, i) => res.arrivals![i] >= from && res.arrivals![i] < to);
        const duringLat = lat(pauseStart, pauseEnd);
        rows.push({
          variant: v.name,
          pattern: v.pattern,
          l1: v.l1,
          pause_ms: o.l1StallPauseMs,
          keys: o.l1StallKeys,
          rate: o.l1StallRate,
          ttl_ms: o.l1StallTtlMs,
          reqs: res.reqs,
          loads_before: before,
          loads_per_s_before: round2(beforeRate),
          loads_during: during,
          loads_per_s_during: round2(perS(during, pauseStart, pauseEnd)),
          excess_loads: Math.max(
            0,
            during - Math.ceil((beforeRate * o.l1StallPauseMs) / 1000 - 1e-9),
          ),
          during_reqs: duringLat.length,
          during_p50: q(duringLat, 0.5),
          during_p99: q(duringLat, 0.99),
          during_max: round2(Math.max(0, ...duringLat)),
          before_p99: q(lat(res.startedAt, pauseStart), 0.99),
          l1_hits: res.counters.l1Hits,
          store_errors: res.counters.storeErrors,
        });
      } finally {
        await app.close();
      }
    }
  } finally {
    await redis.stop();
  }
  ctx.log(renderTable(L1_STALL_COLUMNS, rows));
  logTargets(ctx, l1StallTargets(rows));
  return rows;
}

export function l1StallTargets(rows: L1StallRow[]): Target[] {
  const without = rows.filter((r) => !r.l1);
  const ref = without.length
    ? ` (${without.map((r) => `${r.variant}: ${r.loads_during} loads, p99 ${r.during_p99} ms`).join('; ')})`
    : '';
  return rows
    .filter((r) => r.l1)
    .map((r) => ({
      id: 'l1-stall',
      text: `${r.variant}: Redis paused (ALL) ${r.pause_ms} ms: 0 backend calls beyond the normal rate, p99 of requests during the pause < 5 ms`,
      met: r.excess_loads === 0 && r.during_p99 < 5,
      measured:
        `${r.loads_during} loads during (normal ${r.loads_per_s_before.toFixed(1)}/s, excess ${r.excess_loads}), ` +
        `p99 ${r.during_p99} ms over ${r.during_reqs} requests${ref}`,
    }));
}
