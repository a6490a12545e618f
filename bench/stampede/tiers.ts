/*
 * The tiers scenarios of `npm run bench:stampede` (--scenario tiers, or one by name): l1-hotset,
 * grace-failing and l1-stall, about the library's in-process tier (module option `l1`) and
 * `@Cacheable({ grace })`. Each starts a private redis-server (INFO commandstats counts only this
 * run's commands, CLIENT PAUSE never pauses the shared Redis). A variant is a pattern of
 * bench-app.ts, run in apps without L1, or with `+l1` (`two-tier-xfetch+l1`) in apps whose
 * StampedeModule has `l1: true`; the same pattern without L1 is measured beside it.
 */
import { performance } from 'node:perf_hooks';
import { Column, quantile, renderTable } from '../shared/table';
import { ALL_PATTERNS, BenchApp, LIBRARY_PATTERNS, PatternName } from './bench-app';
import { startInstances } from './instances';
import { doubleRefreshes, LoadJob, runLoad, warmAndMeasure } from './load';
import {
  CommandCounts,
  commandDelta,
  PrivateRedis,
  renderCommandBreakdown,
  totalCommands,
} from './private-redis';
import { logTargets, ScenarioContext } from './resilience';
import type { BenchOptions, BenchReport, Target } from './stampede-bench';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const epochNow = () => performance.timeOrigin + performance.now();

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

function q(values: number[], p: number): number {
  return round2(quantile(Float64Array.from(values).sort(), p));
}

/** A pattern, in apps with the library's L1 (`+l1`) or without. */
export interface TierVariant {
  name: string;
  pattern: PatternName;
  l1: boolean;
}

/** `two-tier-xfetch` or `two-tier-xfetch+l1`; throws on an unknown pattern. */
export function parseVariant(text: string): TierVariant {
  const name = text.trim();
  const l1 = name.endsWith('+l1');
  const pattern = (l1 ? name.slice(0, -3) : name) as PatternName;
  if (!ALL_PATTERNS.includes(pattern))
    throw new Error(`unknown pattern ${pattern} in ${name}; known: ${ALL_PATTERNS.join(', ')}`);
  if (l1 && !(LIBRARY_PATTERNS as readonly string[]).includes(pattern))
    throw new Error(`${name}: +l1 turns on the library's L1, ${pattern} is bench-local`);
  return { name, pattern, l1 };
}

/**
 * Loads per request of a cache-aside that loads every key exactly once per TTL when it is asked
 * for: each key is a renewal process (cached for one TTL after a load, then loaded by the next
 * request), so a key asked for lambda times per TTL is loaded lambda / (1 + lambda) times per
 * TTL. Zipf(n, s) popularity, `rate` requests per second in all. Load times are neglected.
 */
export function idealLoadsPerRequest(n: number, s: number, rate: number, ttlMs: number): number {
  const perTtl = (rate * ttlMs) / 1000;
  let sum = 0;
  for (let r = 0; r < n; r++) sum += s === 0 ? 1 : 1 / Math.pow(r + 1, s);
  let loads = 0;
  for (let r = 0; r < n; r++) {
    const lambda = (perTtl * (s === 0 ? 1 : 1 / Math.pow(r + 1, s))) / sum;
    loads += lambda / (1 + lambda);
  }
  return loads / perTtl;
}

// --- l1-hotset ----------------------------------------------------------------------------

export interface L1HotsetRow {
  variant: string;
  pattern: PatternName;
  l1: boolean;
  instances: number;
  keys: number;
  zipf: number;
  rate: number;
  ttl_ms: number;
  duration_ms: number;
  reqs: number;
  loads: number;
  loads_per_req: number;
  lock_waits: number;
  joins: number;
  /** Library commands of the measured run (commandstats delta). */
  cmds: number;
  cmds_per_req: number;
  /** Probe: cold keys called once each on one instance (every call a miss and a load). */
  cmds_per_load: number;
  /** loads_per_req x cmds_per_load: what the loads alone cost per request. */
  floor_cmds_per_req: number;
  hot_keys: number;
  loads_per_hot_key_per_ttl: number;
  max_loads_key_per_ttl: number;
  double_refreshes: number;
  /** Calls that neither ran the loader nor joined a flight that ran it (measured in the caller). */
  hits: number;
  hit_share: number;
  hit_p50: number;
  hit_p99: number;
  /** p99 of the hits served by the in-process tier. */
  l1_hit_p99: number;
  /** Hits that read Redis (or joined a flight that read it), and their latency. */
  store_hits: number;
  store_hit_p50: number;
  store_hit_p99: number;
  /**
   * Misses measured in the caller: calls that ran the loader, calls that waited for another
   * instance's lock (its load), and calls that joined a flight that did either.
   */
  ran_load: number;
  waited_lock: number;
  joined_load: number;
  /** l1Hits (library) or bento-like's own L1 hits, per request. */
  l1_hit_share: number;
  /** CPU time of the instances (user + system, load generator included) per request, in us. */
  cpu_us_per_req: number;
  store_errors: number;
  commands: CommandCounts;
}

export const L1_HOTSET_COLUMNS: Column<L1HotsetRow>[] = [
  { header: 'variant', value: (r) => r.variant },
  { header: 'inst', value: (r) => r.instances },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads', value: (r) => r.loads },
  { header: 'loads/req', value: (r) => r.loads_per_req, digits: 3 },
  { header: 'cmds', value: (r) => r.cmds },
  { header: 'cmds/req', value: (r) => r.cmds_per_req, digits: 3 },
  { header: 'cmds/load', value: (r) => r.cmds_per_load, digits: 2 },
  { header: 'floor_cmds/req', value: (r) => r.floor_cmds_per_req, digits: 3 },
  { header: 'loads/key/ttl(top)', value: (r) => r.loads_per_hot_key_per_ttl, digits: 3 },
  { header: 'max_loads/key/ttl', value: (r) => r.max_loads_key_per_ttl, digits: 2 },
  { header: 'double_refresh', value: (r) => r.double_refreshes },
  { header: 'hits', value: (r) => r.hits },
  { header: 'hit_p50_ms', value: (r) => r.hit_p50, digits: 3 },
  { header: 'hit_p99_ms', value: (r) => r.hit_p99, digits: 3 },
  { header: 'l1_hits%', value: (r) => `${(100 * r.l1_hit_share).toFixed(1)}%` },
  { header: 'l1_hit_p99_ms', value: (r) => r.l1_hit_p99, digits: 3 },
  { header: 'redis_hits', value: (r) => r.store_hits },
  { header: 'redis_hit_p50_ms', value: (r) => r.store_hit_p50, digits: 3 },
  { header: 'redis_hit_p99_ms', value: (r) => r.store_hit_p99, digits: 3 },
  { header: 'ran_load', value: (r) => r.ran_load },
  { header: 'waited_lock', value: (r) => r.waited_lock },
  { header: 'joined_load', value: (r) => r.joined_load },
  { header: 'cpu_us/req', value: (r) => r.cpu_us_per_req, digits: 0 },
  { header: 'store_err', value: (r) => r.store_errors },
];

export async function l1Hotset(ctx: ScenarioContext): Promise<L1HotsetRow[]> {
  const o = ctx.opts;
  const k = Math.max(1, o.l1HotsetInstances);
  const variants = o.l1HotsetVariants.map(parseVariant);
  const ideal = idealLoadsPerRequest(
    o.l1HotsetKeys,
    o.l1HotsetZipf,
    o.l1HotsetRate,
    o.l1HotsetTtlMs,
  );
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## l1-hotset: ${redis.describe()}; ${o.l1HotsetKeys} keys, Zipf s=${o.l1HotsetZipf}, Poisson ${o.l1HotsetRate} req/s in all` +
      `${k > 1 ? ` over ${k} forked instances (${Math.round(o.l1HotsetRate / k)} each)` : ' in this process'}, TTL ${o.l1HotsetTtlMs} ms, ` +
      `backend ${o.l1HotsetBackendMs} ms, ${o.l1HotsetDurationMs} ms measured after ${o.l1HotsetWarmupMs} ms of warm-up; ` +
      `+l1 = StampedeModule l1: true; cmds/load from ${o.l1HotsetProbeKeys} cold keys called once; hits = calls that did not run a load, wait for a lock or join a flight that did; ` +
      `a cache-aside loading each key once per TTL makes ${ideal.toFixed(3)} loads per request here (Zipf model)`,
  );
  const rows = new Map<string, L1HotsetRow>();
  try {
    for (const l1 of [false, true]) {
      const group = variants.filter((v) => v.l1 === l1);
      if (!group.length) continue;
      const instances = await startInstances(
        ctx.config(o.l1HotsetTtlMs, {
          redisUrl: redis.url,
          backendMs: o.l1HotsetBackendMs,
          recordLoads: true,
          operationTimeout: o.operationTimeoutMs,
          cooldown: o.cooldownMs,
          moduleOptions: l1 ? { l1: true } : undefined,
        }),
        k,
      );
      try {
        for (const v of group) {
          // Load the scripts (EVALSHA's first NOSCRIPT + EVAL) before anything is counted.
          const probe: LoadJob = {
            pattern: v.pattern,
            keyPrefix: `l1hs-prime:${v.name}:`,
            keys: 1,
            zipf: 0,
            mode: 'sweep',
            concurrency: 20,
          };
          await instances[0].load(probe);
          const s0 = await redis.commandCounts();
          const cold = await instances[0].load({
            ...probe,
            keyPrefix: `l1hs-probe:${v.name}:`,
            keys: o.l1HotsetProbeKeys,
          });
          const s1 = await redis.commandCounts();
          const coldCmds = totalCommands(commandDelta(s1, s0));
          const job: LoadJob = {
            pattern: v.pattern,
            keyPrefix: `l1hs:${v.name}:`,
            keys: o.l1HotsetKeys,
            zipf: o.l1HotsetZipf,
            mode: 'poisson',
            rate: o.l1HotsetRate / k,
            durationMs: o.l1HotsetWarmupMs,
          };
          const run = await warmAndMeasure(instances, redis, job, o.l1HotsetDurationMs, {
            classify: true,
          });
          const { results, commands, cmds, reqs, loads, perKey } = run;
          const c = run.counters;
          const ttls = o.l1HotsetDurationMs / o.l1HotsetTtlMs;
          const hot = Math.min(o.l1HotsetHotKeys, o.l1HotsetKeys);
          let hotLoads = 0;
          for (let r = 0; r < hot; r++) hotLoads += perKey.get(`${job.keyPrefix}${r}`) ?? 0;
          const l1Hits = results.flatMap((r) => r.l1HitLatencies ?? []);
          const storeHits = results.flatMap((r) => r.storeHitLatencies ?? []);
          const hits = [...l1Hits, ...storeHits];
          const cmdsPerLoad = cold.counters.loads ? coldCmds / cold.counters.loads : NaN;
          rows.set(v.name, {
            variant: v.name,
            pattern: v.pattern,
            l1: v.l1,
            instances: k,
            keys: o.l1HotsetKeys,
            zipf: o.l1HotsetZipf,
            rate: o.l1HotsetRate,
            ttl_ms: o.l1HotsetTtlMs,
            duration_ms: o.l1HotsetDurationMs,
            reqs,
            loads: c.loads,
            loads_per_req: c.loads / reqs,
            lock_waits: c.lockWaits,
            joins: c.joins,
            cmds,
            cmds_per_req: cmds / reqs,
            cmds_per_load: cmdsPerLoad,
            floor_cmds_per_req: (c.loads / reqs) * cmdsPerLoad,
            hot_keys: hot,
            loads_per_hot_key_per_ttl: hotLoads / hot / ttls,
            max_loads_key_per_ttl: Math.max(0, ...perKey.values()) / ttls,
            double_refreshes: doubleRefreshes(loads, o.l1HotsetTtlMs / 2),
            hits: hits.length,
            hit_share: hits.length / reqs,
            hit_p50: q(hits, 0.5),
            hit_p99: q(hits, 0.99),
            l1_hit_p99: q(l1Hits, 0.99),
            store_hits: storeHits.length,
            store_hit_p50: q(storeHits, 0.5),
            store_hit_p99: q(storeHits, 0.99),
            ran_load: results.reduce((a, r) => a + (r.ranLoad ?? 0), 0),
            waited_lock: results.reduce((a, r) => a + (r.waitedLock ?? 0), 0),
            joined_load: results.reduce((a, r) => a + (r.joinedLoad ?? 0), 0),
            l1_hit_share: c.l1Hits / reqs,
            cpu_us_per_req: (1000 * results.reduce((a, r) => a + r.cpuMs, 0)) / reqs,
            store_errors: c.storeErrors + cold.counters.storeErrors,
            commands,
          });
        }
      } finally {
        await Promise.all(instances.map((i) => i.close()));
      }
    }
  } finally {
    await redis.stop();
  }
  const out = variants.map((v) => rows.get(v.name)!);
  ctx.log(renderTable(L1_HOTSET_COLUMNS, out));
  ctx.log(
    `\nl1-hotset: commandstats of the measured run by command (calls; commands inside scripts counted under their own name)`,
  );
  ctx.log(
    renderCommandBreakdown(
      out.map((r) => ({
        name: r.variant,
        commands: r.commands,
        cmds: r.cmds,
        perRequest: r.cmds_per_req,
      })),
    ),
  );
  logTargets(ctx, l1HotsetTargets(out, ideal));
  return out;
}

function l1HotsetTargets(rows: L1HotsetRow[], ideal: number): Target[] {
  const refs = (f: (r: L1HotsetRow) => string) => {
    const others = rows.filter((r) => !r.l1);
    return others.length ? ` (${others.map((r) => `${r.variant} ${f(r)}`).join('; ')})` : '';
  };
  const targets: Target[] = [];
  for (const r of rows.filter((x) => x.l1)) {
    targets.push(
      {
        id: 'l1-hotset',
        text: `${r.variant}: <= 0.3 Redis commands per request`,
        met: r.cmds_per_req <= 0.3,
        measured:
          `${r.cmds_per_req.toFixed(3)}; floor of its loads ${r.loads_per_req.toFixed(3)} loads/req x ${r.cmds_per_load.toFixed(2)} cmds/load = ` +
          `${r.floor_cmds_per_req.toFixed(3)}, of one load per key per TTL ${ideal.toFixed(3)} x ${r.cmds_per_load.toFixed(2)} = ${(ideal * r.cmds_per_load).toFixed(3)}` +
          refs((x) => x.cmds_per_req.toFixed(3)),
      },
      ...(r.instances === 1
        ? [
            {
              id: 'l1-hotset',
              text: `${r.variant}: <= 0.97 Redis commands per request in one process`,
              met: r.cmds_per_req <= 0.97,
              measured:
                `${r.cmds_per_req.toFixed(3)} (${r.cmds_per_load.toFixed(2)} cmds/load)` +
                refs((x) => x.cmds_per_req.toFixed(3)),
            },
          ]
        : []),
      {
        id: 'l1-hotset',
        text: `${r.variant}: <= 1 load per key per TTL (top ${r.hot_keys} keys, across ${r.instances} instance(s), tolerance 5%)`,
        met: r.loads_per_hot_key_per_ttl <= 1.05,
        measured:
          `${r.loads_per_hot_key_per_ttl.toFixed(3)}, max ${r.max_loads_key_per_ttl.toFixed(2)}, double ${r.double_refreshes}` +
          refs((x) => x.loads_per_hot_key_per_ttl.toFixed(3)),
      },
      {
        id: 'l1-hotset',
        text: `${r.variant}: p99 of hits < 1 ms`,
        met: r.hit_p99 < 1,
        measured:
          `${r.hit_p99} ms (p50 ${r.hit_p50} ms, ${r.hits} hits; L1 hits p99 ${r.l1_hit_p99} ms, ` +
          `Redis hits ${r.store_hits}, p99 ${r.store_hit_p99} ms)` +
          refs((x) => `${x.hit_p99} ms`),
      },
    );
  }
  return targets;
}

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

/** Every tiers target, from a report (the final targets section). */
export function tiersTargets(report: BenchReport): Target[] {
  const o = report.options as BenchOptions;
  const ideal = report.l1Hotset.length
    ? idealLoadsPerRequest(o.l1HotsetKeys, o.l1HotsetZipf, o.l1HotsetRate, o.l1HotsetTtlMs)
    : 0;
  return [
    ...l1HotsetTargets(report.l1Hotset, ideal),
    ...graceTargets(report.graceFailing),
    ...l1StallTargets(report.l1Stall),
  ];
}
