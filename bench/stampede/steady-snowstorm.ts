/*
 * The steady (Poisson arrivals on one key, XFetch against plain single-flight) and snowstorm
 * (many keys written together, then expiring together, with and without @JitterTtl) scenarios
 * of bench:stampede.
 */
import { performance } from 'node:perf_hooks';
import { Column, quantile, renderTable } from '../shared/table';
import type { Target } from '../shared/targets';
import { BenchApp } from './bench-app';
import { diffCounters, PatternName } from './patterns';
import { commandsSoFar, round2, ScenarioContext, sleep } from './context';
import { doubleRefreshes, drive, poissonArrivals } from './load';

export interface SteadyRow {
  pattern: PatternName;
  rate: number;
  duration_ms: number;
  reqs: number;
  db_calls: number;
  /** Requests that waited for a loader (library: metrics().misses; bench-local: counted there). */
  blocking_misses: number;
  blocking_pct: number;
  /** Cross-check: requests slower than half the backend time. */
  slow_reqs: number;
  early_recomputes: number;
  /** Loads of the key that started less than TTL / 2 after the previous one (one expiry, two loads). */
  double_refreshes: number;
  p50: number;
  p99: number;
  p999: number;
  rps: number;
  redis_cmds_per_req: number;
  store_errors: number;
}

export interface SnowRow {
  variant: string;
  keys: number;
  rate: number;
  duration_ms: number;
  reqs: number;
  db_calls: number;
  /** Most loader calls in any window of windowMs (sliding), warm-up excluded. */
  max_window_calls: number;
  window_ms: number;
  /** Start of that window, ms after the keys were written. */
  max_window_at_ms: number;
  p99: number;
  redis_cmds_per_req: number;
  store_errors: number;
}

/** Most timestamps in any window [t, t + windowMs), and where it starts. */
export function maxInWindow(
  sortedTimes: number[],
  windowMs: number,
): { count: number; at: number } {
  let best = { count: 0, at: 0 };
  let lo = 0;
  for (let hi = 0; hi < sortedTimes.length; hi++) {
    while (sortedTimes[hi] - sortedTimes[lo] >= windowMs) lo++;
    if (hi - lo + 1 > best.count) best = { count: hi - lo + 1, at: sortedTimes[lo] };
  }
  return best;
}

// --- steady -----------------------------------------------------------------------------

export async function steady(ctx: ScenarioContext): Promise<SteadyRow[]> {
  const o = ctx.opts;
  ctx.log(
    `\n## steady: Poisson arrivals ${o.rate}/s for ${o.durationMs} ms on one key, TTL ${o.steadyTtlMs} ms, ` +
      `backend ${o.backendMs} ms, beta ${o.beta} (key warmed before, not counted)`,
  );
  const app = await BenchApp.create(ctx.config(o.steadyTtlMs, { recordLoads: true }));
  const rows: SteadyRow[] = [];
  try {
    for (const pattern of o.steadyPatterns) {
      const key = `steady:${pattern}`;
      const call = app.caller(pattern);
      await call(key); // warm: a steady state starts with a cached value
      const firstLoad = app.backend.log.length;
      const arrivals = poissonArrivals(o.rate, o.durationMs);
      const latencies = new Array<number>(arrivals.length);
      const c0 = app.counters(pattern);
      const before = await commandsSoFar(ctx.control);
      const wall = await drive(arrivals, (i) => {
        const t0 = performance.now();
        return call(key).then(() => void (latencies[i] = performance.now() - t0));
      });
      const after = await commandsSoFar(ctx.control);
      const c = diffCounters(app.counters(pattern), c0);
      const sorted = Float64Array.from(latencies).sort();
      const reqs = arrivals.length;
      rows.push({
        pattern,
        rate: o.rate,
        duration_ms: o.durationMs,
        reqs,
        db_calls: c.loads,
        blocking_misses: c.misses,
        blocking_pct: (100 * c.misses) / reqs,
        slow_reqs: latencies.filter((l) => l > o.backendMs / 2).length,
        early_recomputes: c.earlyRecomputes,
        double_refreshes: doubleRefreshes(
          app.backend.log.slice(firstLoad).map((r): [string, number] => [r.key, r.at]),
          o.steadyTtlMs / 2,
        ),
        p50: round2(quantile(sorted, 0.5)),
        p99: round2(quantile(sorted, 0.99)),
        p999: round2(quantile(sorted, 0.999)),
        rps: round2(reqs / (wall / 1000)),
        redis_cmds_per_req: (after - before) / reqs,
        store_errors: c.storeErrors,
      });
    }
  } finally {
    await app.close();
  }
  ctx.log(renderTable(STEADY_COLUMNS, rows));
  return rows;
}

// --- snowstorm --------------------------------------------------------------------------

export async function snowstorm(ctx: ScenarioContext): Promise<SnowRow[]> {
  const o = ctx.opts;
  ctx.log(
    `\n## snowstorm: ${o.snowKeys} keys written together, then ${o.snowRate} req/s (Poisson, uniform over the keys) ` +
      `for ${o.snowDurationMs} ms, TTL ${o.snowTtlMs} ms, backend ${o.backendMs} ms, @SingleFlight, ` +
      `most loader calls in any ${o.windowMs} ms window`,
  );
  const app = await BenchApp.create(ctx.config(o.snowTtlMs, { recordLoadTimes: true }));
  const rows: SnowRow[] = [];
  try {
    const variants: { variant: string; pattern: PatternName }[] = [
      { variant: 'no jitter', pattern: 'singleflight' },
      { variant: `@JitterTtl(${o.jitter})`, pattern: 'jitter' },
    ];
    for (const { variant, pattern } of variants) {
      const call = app.caller(pattern);
      const keys = Array.from({ length: o.snowKeys }, (_, i) => `snow:${pattern}:${i}`);
      await Promise.all(keys.map((key) => call(key))); // written together (a deploy, a warm-up)
      const written = performance.now();
      const firstLoad = app.backend.times.length;
      const arrivals = poissonArrivals(o.snowRate, o.snowDurationMs);
      const pick = arrivals.map(() => keys[Math.floor(Math.random() * keys.length)]);
      const latencies = new Array<number>(arrivals.length);
      const c0 = app.counters(pattern);
      const before = await commandsSoFar(ctx.control);
      await drive(arrivals, (i) => {
        const t0 = performance.now();
        return call(pick[i]).then(() => void (latencies[i] = performance.now() - t0));
      });
      const after = await commandsSoFar(ctx.control);
      const c = diffCounters(app.counters(pattern), c0);
      const times = app.backend.times.slice(firstLoad).sort((a, b) => a - b);
      const worst = maxInWindow(times, o.windowMs);
      rows.push({
        variant,
        keys: o.snowKeys,
        rate: o.snowRate,
        duration_ms: o.snowDurationMs,
        reqs: arrivals.length,
        db_calls: c.loads,
        max_window_calls: worst.count,
        window_ms: o.windowMs,
        max_window_at_ms: Math.round(worst.at - written),
        p99: round2(quantile(Float64Array.from(latencies).sort(), 0.99)),
        redis_cmds_per_req: (after - before) / arrivals.length,
        store_errors: c.storeErrors,
      });
      // Let this variant's keys expire so the next one starts on a quiet Redis.
      await sleep(o.snowTtlMs * (1 + o.jitter) + 50);
    }
  } finally {
    await app.close();
  }
  ctx.log(renderTable(SNOW_COLUMNS, rows));
  return rows;
}

export const STEADY_COLUMNS: Column<SteadyRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'db_calls', value: (r) => r.db_calls },
  { header: 'blocking_misses', value: (r) => r.blocking_misses },
  { header: 'blocking%', value: (r) => `${r.blocking_pct.toFixed(2)}%` },
  { header: 'slow>50%backend', value: (r) => r.slow_reqs },
  { header: 'early_recomputes', value: (r) => r.early_recomputes },
  { header: 'double_refreshes', value: (r) => r.double_refreshes },
  { header: 'p50_ms', value: (r) => r.p50, digits: 2 },
  { header: 'p99_ms', value: (r) => r.p99, digits: 2 },
  { header: 'p999_ms', value: (r) => r.p999, digits: 2 },
  { header: 'rps', value: (r) => r.rps, digits: 1 },
  { header: 'redis_cmds_per_req', value: (r) => r.redis_cmds_per_req, digits: 3 },
  { header: 'store_err', value: (r) => r.store_errors },
];

export const SNOW_COLUMNS: Column<SnowRow>[] = [
  { header: 'variant', value: (r) => r.variant },
  { header: 'keys', value: (r) => r.keys },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'db_calls', value: (r) => r.db_calls },
  { header: 'max_calls_per_window', value: (r) => r.max_window_calls },
  { header: 'window_ms', value: (r) => r.window_ms },
  { header: 'window_at_ms', value: (r) => r.max_window_at_ms },
  { header: 'p99_ms', value: (r) => r.p99, digits: 2 },
  { header: 'redis_cmds_per_req', value: (r) => r.redis_cmds_per_req, digits: 3 },
  { header: 'store_err', value: (r) => r.store_errors },
];

/** Targets 3 and 4: XFetch under steady load, @JitterTtl against a snowstorm. */
export function steadyTargets(
  steady: SteadyRow[],
  snowstorm: SnowRow[],
  cpuBurn: number,
): Target[] {
  const targets: Target[] = [];
  const sfSteady = steady.find((r) => r.pattern === 'singleflight');
  const xf = steady.find((r) => r.pattern === 'xfetch');
  if (sfSteady && xf) {
    const ratio = xf.db_calls / sfSteady.db_calls;
    const un = steady.find((r) => r.pattern === 'xfetch-uncoalesced');
    targets.push({
      id: '3',
      text: 'steady: xfetch blocking misses <= 0.5%, loader calls <= 1.5x singleflight, 0 double refreshes',
      met: xf.blocking_pct <= 0.5 && ratio <= 1.5 && xf.double_refreshes === 0,
      measured:
        `blocking ${xf.blocking_pct.toFixed(2)}%, loader ${xf.db_calls} vs ${sfSteady.db_calls} = ${ratio.toFixed(2)}x, ` +
        `double refreshes ${xf.double_refreshes}` +
        (un ? ` (uncoalesced ${(un.db_calls / sfSteady.db_calls).toFixed(2)}x)` : '') +
        (cpuBurn ? ` [--cpu-burn ${cpuBurn}]` : ''),
    });
  }
  if (snowstorm.length === 2) {
    const [plain, jittered] = snowstorm;
    const cut = 1 - jittered.max_window_calls / plain.max_window_calls;
    targets.push({
      id: '4',
      text: 'snowstorm: @JitterTtl cuts the worst window of loader calls by >= 30%',
      met: cut >= 0.3,
      measured: `${plain.max_window_calls} -> ${jittered.max_window_calls} (${(100 * cut).toFixed(0)}% less)`,
    });
  }
  return targets;
}
