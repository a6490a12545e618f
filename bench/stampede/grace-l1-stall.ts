/*
 * The grace-failing (`@Cacheable({ grace })` while the loader fails) and l1-stall (Redis paused
 * under apps with and without the library's L1) scenarios of bench:stampede, on a private
 * redis-server, one fresh app (1 process) per pattern or variant.
 */
import { columns } from '../shared/columns';
import type { PrivateRedis } from '../shared/private-redis';
import type { Target } from '../shared/targets';
import { BenchApp } from './bench-app';
import { PatternName } from './patterns';
import { eachOf, q, round2, runScenario, ScenarioContext, sleep } from './scenario';
import { runLoad, poissonJob } from './load';
import { group, parseVariant, TierVariant } from './options';
import { pausedRun, pauseAt } from './late-lock-stall';

// --- grace-failing ------------------------------------------------------------------------

export type GraceRow = Awaited<ReturnType<typeof graceRow>>;

export const GRACE_COLUMNS = columns<GraceRow>(
  'pattern, grace, reqs, loads, injected_failures=failures, caller_errors, ' +
    'errors/failure=errors_per_failure:3, stale_serves, fail_safes, p50_ms=p50:2, p99_ms=p99:2, ' +
    'store_err=store_errors',
  { grace: (r) => (r.grace_ms ? `${r.grace_ms} ms` : 'none') },
);

async function graceRow(ctx: ScenarioContext, redis: PrivateRedis, pattern: PatternName) {
  const o = ctx.opts;
  const g = group(o, 'grace');
  const extra = { failRate: g.failRate, graceMs: g.ms, graceBackoffMs: g.backoffMs };
  return BenchApp.with(ctx.config(o.graceTtlMs, extra, redis), async (app) => {
    const job = poissonJob(pattern, `grace:${pattern}:`, g.keys, g.rate, g.durationMs);
    // Warm-up, not counted: every key loaded, one after the other over a TTL (expiries
    // spread), then each once more (a key whose first load failed is loaded now).
    await runLoad(app, { ...job, mode: 'sweep', spreadMs: o.graceTtlMs });
    await runLoad(app, { ...job, mode: 'sweep', concurrency: 20 });
    const f0 = app.backend.failures;
    const res = await runLoad(app, { ...job, perRequest: true });
    await sleep(o.backendMs + 100); // background refreshes started at the end finish
    /** Loads that threw during the measured run (the injected failures). */
    const failures = app.backend.failures - f0;
    const latencies = res.latencies ?? [];
    return {
      pattern,
      /** ms of grace (0: none). */
      grace_ms: pattern === 'two-tier-grace' ? o.graceMs : 0,
      keys: o.graceKeys,
      rate: o.graceRate,
      ttl_ms: o.graceTtlMs,
      duration_ms: o.graceDurationMs,
      fail_rate: o.graceFailRate,
      reqs: res.reqs,
      loads: res.counters.loads,
      failures,
      /** Calls that rejected: the errors that reached callers. */
      caller_errors: res.callerErrors,
      errors_per_failure: failures ? res.callerErrors / failures : 0,
      stale_serves: res.counters.staleServes,
      fail_safes: res.counters.failSafes,
      p50: q(latencies, 0.5),
      p99: q(latencies, 0.99),
      store_errors: res.counters.storeErrors,
    };
  });
}

export function graceFailing(ctx: ScenarioContext) {
  const o = ctx.opts;
  return runScenario(ctx, {
    privateRedis: true,
    title: (redis) =>
      `grace-failing: ${redis.describe()}; loader failing ${(o.graceFailRate * 100).toFixed(0)} % of the time (random), ` +
      `Poisson ${o.graceRate} req/s over ${o.graceKeys} keys (uniform), TTL ${o.graceTtlMs} ms, backend ${o.backendMs} ms, ` +
      `${o.graceDurationMs} ms measured after every key was loaded; two-tier-grace = two-tier + grace ${o.graceMs} ms, ` +
      `graceBackoff ${o.graceBackoffMs} ms; one fresh app (1 process) per pattern`,
    rows: (redis) => eachOf(o.gracePatterns, (p) => graceRow(ctx, redis, p)),
    columns: GRACE_COLUMNS,
    targets: graceTargets,
  });
}

function graceTargets(rows: GraceRow[]): Target[] {
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

export type L1StallRow = Awaited<ReturnType<typeof l1StallRow>>;

export const L1_STALL_COLUMNS = columns<L1StallRow>(
  'variant, pause, reqs, loads_before, loads/s_before=loads_per_s_before:1, loads_during, ' +
    'loads/s_during=loads_per_s_during:1, excess_loads, reqs_during=during_reqs, ' +
    'p50_during_ms=during_p50:2, p99_during_ms=during_p99:2, max_during_ms=during_max:2, ' +
    'p99_before_ms=before_p99:2, l1_hits, store_err=store_errors',
  { pause: (r) => `ALL ${r.pause_ms} ms` },
);

async function l1StallRow(ctx: ScenarioContext, redis: PrivateRedis, v: TierVariant) {
  const o = ctx.opts;
  const g = group(o, 'l1Stall');
  const extra = { recordLoads: true, moduleOptions: v.l1 ? { l1: true } : undefined };
  return BenchApp.with(ctx.config(o.l1StallTtlMs, extra, redis), async (app) => {
    const job = poissonJob(v.pattern, `l1st:${v.name}:`, g.keys, g.rate, g.durationMs);
    await runLoad(app, { ...job, mode: 'sweep', concurrency: 20 }); // every key loaded
    const run = await pausedRun(app, redis, job, o.l1StallPauseMs, 'ALL');
    const { res, start, end, loads, rate } = run;
    const during = loads(start, end);
    const beforeRate = rate(res.startedAt, start);
    return {
      variant: v.name,
      pattern: v.pattern,
      l1: v.l1,
      pause_ms: o.l1StallPauseMs,
      keys: o.l1StallKeys,
      rate: o.l1StallRate,
      ttl_ms: o.l1StallTtlMs,
      reqs: res.reqs,
      loads_before: loads(res.startedAt, start),
      loads_per_s_before: round2(beforeRate),
      loads_during: during,
      loads_per_s_during: round2(rate(start, end)),
      /** Loads during the pause beyond the normal rate (normal rate x pause, rounded up). */
      excess_loads: Math.max(0, during - Math.ceil((beforeRate * o.l1StallPauseMs) / 1000 - 1e-9)),
      ...run.latency,
      l1_hits: res.counters.l1Hits,
      store_errors: res.counters.storeErrors,
    };
  });
}

export function l1Stall(ctx: ScenarioContext) {
  const o = ctx.opts;
  return runScenario(ctx, {
    privateRedis: true,
    title: (redis) =>
      `l1-stall: ${redis.describe()}; ${o.l1StallKeys} keys loaded first (Redis and L1 warm), then Poisson ${o.l1StallRate} req/s over them (uniform), ` +
      `TTL ${o.l1StallTtlMs} ms (fresh through the run), backend ${o.backendMs} ms, ${o.l1StallDurationMs} ms with CLIENT PAUSE ${o.l1StallPauseMs} ALL at ${pauseAt(o.l1StallDurationMs, o.l1StallPauseMs)} ms; ` +
      `operationTimeout ${o.operationTimeoutMs} ms, cooldown ${o.cooldownMs} ms; one fresh app (1 process) per variant, +l1 = StampedeModule l1: true`,
    rows: (redis) => eachOf(o.l1StallVariants.map(parseVariant), (v) => l1StallRow(ctx, redis, v)),
    columns: L1_STALL_COLUMNS,
    targets: l1StallTargets,
  });
}

function l1StallTargets(rows: L1StallRow[]): Target[] {
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
