/*
 * The steady (Poisson arrivals on one key, XFetch against plain single-flight) and snowstorm
 * (many keys written together, then expiring together, with and without @JitterTtl) scenarios
 * of bench:stampede.
 */
import { columns } from '../shared/columns';
import type { Target } from '../shared/targets';
import type { BenchOptions } from './options';
import { BenchApp } from './bench-app';
import { PatternName } from './patterns';
import { commandsSoFar, eachOf, q, round2, runScenario, ScenarioContext, sleep } from './scenario';
import { doubleRefreshes, epochNow, LoadJob, poissonJob, runLoad } from './load';

/** Most timestamps in any window [t, t + windowMs), and where it starts. */
export function maxInWindow(sortedTimes: number[], windowMs: number) {
  let best = { count: 0, at: 0 };
  let lo = 0;
  for (let hi = 0; hi < sortedTimes.length; hi++) {
    while (sortedTimes[hi] - sortedTimes[lo] >= windowMs) lo++;
    if (hi - lo + 1 > best.count) best = { count: hi - lo + 1, at: sortedTimes[lo] };
  }
  return best;
}

/** Runs `job` (perRequest) in `app`, and counts the shared Redis' commands per request. */
async function poissonRun(ctx: ScenarioContext, app: BenchApp, job: LoadJob) {
  const before = await commandsSoFar(ctx.control);
  const res = await runLoad(app, { ...job, perRequest: true });
  const cmds = (await commandsSoFar(ctx.control)) - before;
  return { res, latencies: res.latencies!, cmdsPerReq: cmds / res.reqs };
}

export type SteadyRow = Awaited<ReturnType<typeof steadyRow>>;

export const STEADY_COLUMNS = columns<SteadyRow>(
  'pattern, reqs, db_calls, blocking_misses, blocking%, slow>50%backend=slow_reqs, ' +
    'early_recomputes, double_refreshes, p50_ms=p50:2, p99_ms=p99:2, p999_ms=p999:2, rps:1, ' +
    'redis_cmds_per_req:3, store_err=store_errors',
  { 'blocking%': (r) => `${r.blocking_pct.toFixed(2)}%` },
);

async function steadyRow(ctx: ScenarioContext, app: BenchApp, pattern: PatternName) {
  const o = ctx.opts;
  const key = `steady:${pattern}:`;
  await app.caller(pattern)(`${key}0`); // warm: a steady state starts with a cached value
  const job = poissonJob(pattern, key, 1, o.rate, o.durationMs);
  const { res, latencies, cmdsPerReq } = await poissonRun(ctx, app, job);
  const { reqs, counters: c } = res;
  return {
    pattern,
    rate: o.rate,
    duration_ms: o.durationMs,
    reqs,
    db_calls: c.loads,
    /** Requests that waited for a loader (library: metrics().misses; bench-local: counted there). */
    blocking_misses: c.misses,
    blocking_pct: (100 * c.misses) / reqs,
    /** Cross-check: requests slower than half the backend time. */
    slow_reqs: latencies.filter((l) => l > o.backendMs / 2).length,
    early_recomputes: c.earlyRecomputes,
    /** Loads that started less than TTL / 2 after the previous one (one expiry, two loads). */
    double_refreshes: doubleRefreshes(res.loads, o.steadyTtlMs / 2),
    p50: q(latencies, 0.5),
    p99: q(latencies, 0.99),
    p999: q(latencies, 0.999),
    rps: round2(reqs / (res.wallMs / 1000)),
    redis_cmds_per_req: cmdsPerReq,
    store_errors: c.storeErrors,
  };
}

export function steady(ctx: ScenarioContext) {
  const o = ctx.opts;
  return runScenario(ctx, {
    title: () =>
      `steady: Poisson arrivals ${o.rate}/s for ${o.durationMs} ms on one key, TTL ${o.steadyTtlMs} ms, ` +
      `backend ${o.backendMs} ms, beta ${o.beta} (key warmed before, not counted)`,
    rows: () =>
      BenchApp.with(ctx.config(o.steadyTtlMs, { recordLoads: true }), (app) =>
        eachOf(o.steadyPatterns, (pattern) => steadyRow(ctx, app, pattern)),
      ),
    columns: STEADY_COLUMNS,
    targets: (rows) => steadyTargets(rows, o),
    targetsAt: 'list',
  });
}

export type SnowRow = Awaited<ReturnType<typeof snowRow>>;

export const SNOW_COLUMNS = columns<SnowRow>(
  'variant, keys, reqs, db_calls, max_calls_per_window=max_window_calls, window_ms, ' +
    'window_at_ms=max_window_at_ms, p99_ms=p99:2, redis_cmds_per_req:3, store_err=store_errors',
);

async function snowRow(ctx: ScenarioContext, app: BenchApp, variant: string, p: PatternName) {
  const o = ctx.opts;
  const call = app.caller(p);
  const keyPrefix = `snow:${p}:`;
  // Every key written together (a deploy, a warm-up).
  await Promise.all(Array.from({ length: o.snowKeys }, (_, i) => call(`${keyPrefix}${i}`)));
  const written = epochNow();
  const job = poissonJob(p, keyPrefix, o.snowKeys, o.snowRate, o.snowDurationMs);
  const { res, latencies, cmdsPerReq } = await poissonRun(ctx, app, job);
  const times = res.loads.map(([, at]) => at).sort((a, b) => a - b);
  const worst = maxInWindow(times, o.windowMs);
  // Let this variant's keys expire so the next one starts on a quiet Redis.
  await sleep(o.snowTtlMs * (1 + o.jitter) + 50);
  return {
    variant,
    keys: o.snowKeys,
    rate: o.snowRate,
    duration_ms: o.snowDurationMs,
    reqs: res.reqs,
    db_calls: res.counters.loads,
    /** Most loader calls in any window of windowMs (sliding), warm-up excluded, and its start. */
    max_window_calls: worst.count,
    window_ms: o.windowMs,
    max_window_at_ms: Math.round(worst.at - written),
    p99: q(latencies, 0.99),
    redis_cmds_per_req: cmdsPerReq,
    store_errors: res.counters.storeErrors,
  };
}

export function snowstorm(ctx: ScenarioContext) {
  const o = ctx.opts;
  return runScenario(ctx, {
    title: () =>
      `snowstorm: ${o.snowKeys} keys written together, then ${o.snowRate} req/s (Poisson, uniform over the keys) ` +
      `for ${o.snowDurationMs} ms, TTL ${o.snowTtlMs} ms, backend ${o.backendMs} ms, @SingleFlight, ` +
      `most loader calls in any ${o.windowMs} ms window`,
    rows: () =>
      BenchApp.with(ctx.config(o.snowTtlMs, { recordLoads: true }), async (app) => [
        await snowRow(ctx, app, 'no jitter', 'singleflight'),
        await snowRow(ctx, app, `@JitterTtl(${o.jitter})`, 'jitter'),
      ]),
    columns: SNOW_COLUMNS,
    targets: snowstormTargets,
    targetsAt: 'list',
  });
}

/** Targets 3 and 4: XFetch under steady load, @JitterTtl against a snowstorm. */
function steadyTargets(steady: SteadyRow[], { cpuBurn }: BenchOptions): Target[] {
  const sf = steady.find((r) => r.pattern === 'singleflight');
  const xf = steady.find((r) => r.pattern === 'xfetch');
  if (!sf || !xf) return [];
  const ratio = xf.db_calls / sf.db_calls;
  const un = steady.find((r) => r.pattern === 'xfetch-uncoalesced');
  return [
    {
      id: '3',
      text: 'steady: xfetch blocking misses <= 0.5%, loader calls <= 1.5x singleflight, 0 double refreshes',
      met: xf.blocking_pct <= 0.5 && ratio <= 1.5 && xf.double_refreshes === 0,
      measured:
        `blocking ${xf.blocking_pct.toFixed(2)}%, loader ${xf.db_calls} vs ${sf.db_calls} = ${ratio.toFixed(2)}x, ` +
        `double refreshes ${xf.double_refreshes}` +
        (un ? ` (uncoalesced ${(un.db_calls / sf.db_calls).toFixed(2)}x)` : '') +
        (cpuBurn ? ` [--cpu-burn ${cpuBurn}]` : ''),
    },
  ];
}

function snowstormTargets(snowstorm: SnowRow[]): Target[] {
  if (snowstorm.length !== 2) return [];
  const [plain, jittered] = snowstorm;
  const cut = 1 - jittered.max_window_calls / plain.max_window_calls;
  return [
    {
      id: '4',
      text: 'snowstorm: @JitterTtl cuts the worst window of loader calls by >= 30%',
      met: cut >= 0.3,
      measured: `${plain.max_window_calls} -> ${jittered.max_window_calls} (${(100 * cut).toFixed(0)}% less)`,
    },
  ];
}
