/*
 * The resilience scenarios of `npm run bench:stampede` (--scenario resilience, or one by name):
 * late-lock, stall, hotset, fanout and warnings. late-lock, stall, hotset and fanout run on a
 * private redis-server that the benchmark starts (CLIENT PAUSE must not pause the shared Redis,
 * and INFO commandstats must count only this run's commands). Every table shows the library
 * pattern beside `singleflight`, measured in the same run.
 */
import { ConsoleLogger, Logger, LogLevel } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { Column, quantile, renderTable } from '../shared/table';
import { BenchApp, BenchConfig, lockKey, PatternName, sumCounters, valueKey } from './bench-app';
import { startInstances } from './instances';
import { doubleRefreshes, LoadJob, LoadResult, runLoad, warmAndMeasure } from './load';
import {
  CommandCounts,
  commandDelta,
  PrivateRedis,
  renderCommandBreakdown,
  totalCommands,
} from './private-redis';
import type { BenchOptions, BenchReport, Target } from './stampede-bench';

export interface ScenarioContext {
  opts: BenchOptions;
  log: (line: string) => void;
  /** The run's key prefix (every key of the run starts with it). */
  prefix: string;
  config(ttlMs: number, extra?: Partial<BenchConfig>): BenchConfig;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const epochNow = () => performance.timeOrigin + performance.now();

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

function q(values: number[], p: number): number {
  return round2(quantile(Float64Array.from(values).sort(), p));
}

const LOCK_PATTERNS: PatternName[] = ['distlock', 'two-tier', 'two-tier-xfetch'];
const XFETCH_LOCK_PATTERNS: PatternName[] = ['two-tier-xfetch'];

/** Target lines printed under a scenario's table (the same lines as in the final section). */
export function logTargets(ctx: ScenarioContext, targets: Target[]): void {
  if (targets.length) ctx.log(targets.map(formatTarget).join('\n'));
}

export function formatTarget(t: Target): string {
  const verdict = t.met === null ? 'N/A    ' : t.met ? 'MET    ' : 'NOT MET';
  return `${verdict} [${t.id}] ${t.text}: ${t.measured}`;
}

// --- late-lock ----------------------------------------------------------------------------

export interface LateLockRow {
  pattern: PatternName;
  /** The lock attempt that the pause delays: read-or-lock (a miss), try-lock (XFetch), or none. */
  path: 'no lock' | 'read-or-lock' | 'try-lock';
  pause: string;
  /** The call during the pause (ms), and its store errors (the timed-out attempt). */
  call1_ms: number;
  call1_store_errors: number;
  /** After the pause and the cool-down: the lock key still there (EXISTS), its PTTL. */
  lock_left: number;
  lock_pttl_ms: number | null;
  /** The next call on the key (a miss: its value was never stored, or deleted for try-lock). */
  call2_ms: number;
  call2_loads: number;
  lock_waits: number;
  lock_wait_ms: number;
}

export const LATE_LOCK_COLUMNS: Column<LateLockRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'lock_path', value: (r) => r.path },
  { header: 'pause', value: (r) => r.pause },
  { header: 'call1_ms', value: (r) => r.call1_ms, digits: 1 },
  { header: 'call1_store_err', value: (r) => r.call1_store_errors },
  { header: 'lock_left', value: (r) => r.lock_left },
  { header: 'lock_pttl_ms', value: (r) => r.lock_pttl_ms },
  { header: 'call2_ms', value: (r) => r.call2_ms, digits: 1 },
  { header: 'call2_loads', value: (r) => r.call2_loads },
  { header: 'lock_waits', value: (r) => r.lock_waits },
  { header: 'lock_wait_ms', value: (r) => r.lock_wait_ms, digits: 1 },
];

export async function lateLock(ctx: ScenarioContext): Promise<LateLockRow[]> {
  const o = ctx.opts;
  const redis = await PrivateRedis.start();
  const ttl = 10_000;
  ctx.log(
    `\n## late-lock: ${redis.describe()}; CLIENT PAUSE ${o.latePauseMs} WRITE, one call (its lock attempt times out after ` +
      `operationTimeout ${o.operationTimeoutMs} ms), wait for the pause + cooldown ${o.cooldownMs} ms, then the next call on the key; ` +
      `TTL ${ttl} ms, backend ${o.backendMs} ms, lock ttl ${o.lockTtlMs} ms`,
  );
  const app = await BenchApp.create(
    ctx.config(ttl, {
      redisUrl: redis.url,
      operationTimeout: o.operationTimeoutMs,
      cooldown: o.cooldownMs,
    }),
  );
  const rows: LateLockRow[] = [];
  try {
    for (const pattern of o.latePatterns) {
      const path = LOCK_PATTERNS.includes(pattern) ? 'read-or-lock' : 'no lock';
      rows.push(await lateLockRow(ctx, app, redis, pattern, path));
      if (XFETCH_LOCK_PATTERNS.includes(pattern))
        rows.push(await lateLockRow(ctx, app, redis, pattern, 'try-lock'));
    }
  } finally {
    await app.close();
    await redis.stop();
  }
  ctx.log(renderTable(LATE_LOCK_COLUMNS, rows));
  logTargets(ctx, lateLockTargets(rows, o));
  return rows;
}

async function lateLockRow(
  ctx: ScenarioContext,
  app: BenchApp,
  redis: PrivateRedis,
  pattern: PatternName,
  path: LateLockRow['path'],
): Promise<LateLockRow> {
  const o = ctx.opts;
  const key = `late:${path === 'try-lock' ? 'try:' : ''}${pattern}`;
  const vKey = valueKey(ctx.prefix, key);
  const lKey = lockKey(ctx.prefix, key);
  const call = app.caller(pattern);
  if (path === 'try-lock') {
    // A value whose recorded load time is huge: the first XFetch draw fires (probability
    // 1 - 1e-5), so the call during the pause starts an early recomputation and its try-lock.
    const envelope = { v: 'seed', d: 1e9, e: Date.now() + 10_000 };
    await redis.control.set(vKey, JSON.stringify(envelope), 'PX', 10_000);
  }
  const c0 = app.counters(pattern);
  const pausedAt = performance.now();
  await redis.pause(o.latePauseMs, 'WRITE');
  let t = performance.now();
  await call(key);
  const call1 = performance.now() - t;
  const c1 = app.counters(pattern);
  const until = pausedAt + o.latePauseMs + o.cooldownMs + 50;
  await sleep(Math.max(0, until - performance.now()));
  const lockLeft = await redis.control.exists(lKey);
  const pttl = lockLeft ? await redis.control.pttl(lKey) : null;
  // try-lock: the value is still cached; drop it, as its expiry would, so the next call misses
  // and competes for the lock (and would wait on a lock left behind).
  if (path === 'try-lock') await redis.control.del(vKey);
  t = performance.now();
  await call(key);
  const call2 = performance.now() - t;
  const c2 = app.counters(pattern);
  return {
    pattern,
    path,
    pause: `WRITE ${o.latePauseMs} ms`,
    call1_ms: round2(call1),
    call1_store_errors: c1.storeErrors - c0.storeErrors,
    lock_left: lockLeft,
    lock_pttl_ms: pttl,
    call2_ms: round2(call2),
    call2_loads: c2.loads - c1.loads,
    lock_waits: c2.lockWaits - c1.lockWaits,
    lock_wait_ms: round2(c2.lockWaitMs - c1.lockWaitMs),
  };
}

function lateLockTargets(rows: LateLockRow[], o: BenchOptions): Target[] {
  const sf = rows.find((r) => r.pattern === 'singleflight');
  const ref = sf ? `; singleflight ${sf.call2_ms} ms` : '';
  return rows
    .filter((r) => r.path !== 'no lock')
    .map((r) => ({
      id: 'late-lock',
      text: `${r.pattern} (${r.path}): after a timed-out lock attempt, next call <= backend + 100 ms (${o.backendMs + 100} ms), lockWaits 0, no lock left`,
      met: r.call2_ms <= o.backendMs + 100 && r.lock_waits === 0 && r.lock_left === 0,
      measured: `${r.call2_ms} ms, lockWaits ${r.lock_waits} (${r.lock_wait_ms} ms), lock_left ${r.lock_left}${ref}`,
    }));
}

// --- stall --------------------------------------------------------------------------------

export interface StallRow {
  pattern: PatternName;
  mode: 'ALL' | 'WRITE';
  pause_ms: number;
  keys: number;
  rate: number;
  reqs: number;
  /** Loader calls per second before, during and after the pause. */
  loads_per_s_before: number;
  loads_per_s_during: number;
  loads_per_s_after: number;
  /** during / before. */
  ratio: number;
  /** Requests that arrived during the pause, and their latency. */
  during_reqs: number;
  during_p50: number;
  during_p99: number;
  during_max: number;
  before_p99: number;
  store_errors: number;
}

export const STALL_COLUMNS: Column<StallRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'pause', value: (r) => `${r.mode} ${r.pause_ms} ms` },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads/s_before', value: (r) => r.loads_per_s_before, digits: 1 },
  { header: 'loads/s_during', value: (r) => r.loads_per_s_during, digits: 1 },
  { header: 'loads/s_after', value: (r) => r.loads_per_s_after, digits: 1 },
  { header: 'during/before', value: (r) => `${r.ratio.toFixed(2)}x` },
  { header: 'reqs_during', value: (r) => r.during_reqs },
  { header: 'p50_during_ms', value: (r) => r.during_p50, digits: 1 },
  { header: 'p99_during_ms', value: (r) => r.during_p99, digits: 1 },
  { header: 'max_during_ms', value: (r) => r.during_max, digits: 1 },
  { header: 'p99_before_ms', value: (r) => r.before_p99, digits: 1 },
  { header: 'store_err', value: (r) => r.store_errors },
];

export async function stall(ctx: ScenarioContext): Promise<StallRow[]> {
  const o = ctx.opts;
  const redis = await PrivateRedis.start();
  const pauseAt = Math.max(0, (o.stallDurationMs - o.stallPauseMs) / 2);
  ctx.log(
    `\n## stall: ${redis.describe()}; Poisson ${o.stallRate} req/s over ${o.stallKeys} keys (uniform), TTL ${o.stallTtlMs} ms, ` +
      `backend ${o.backendMs} ms, ${o.stallDurationMs} ms measured after a warm-up (keys loaded one by one over a TTL, then ${o.stallWarmupMs} ms of traffic); ` +
      `CLIENT PAUSE ${o.stallPauseMs} ${o.stallMode} at ${pauseAt} ms; operationTimeout ${o.operationTimeoutMs} ms, cooldown ${o.cooldownMs} ms`,
  );
  const app = await BenchApp.create(
    ctx.config(o.stallTtlMs, {
      redisUrl: redis.url,
      recordLoads: true,
      operationTimeout: o.operationTimeoutMs,
      cooldown: o.cooldownMs,
    }),
  );
  const rows: StallRow[] = [];
  try {
    for (const pattern of o.stallPatterns) {
      const job: LoadJob = {
        pattern,
        keyPrefix: `stall:${pattern}:`,
        keys: o.stallKeys,
        zipf: 0,
        mode: 'poisson',
        rate: o.stallRate,
        durationMs: o.stallWarmupMs,
      };
      // Warm-up: the keys loaded one after the other over one TTL (so they do not all expire
      // together), then the traffic itself.
      await runLoad(app, { ...job, mode: 'sweep', spreadMs: o.stallTtlMs });
      await runLoad(app, job);
      let pauseStart = Infinity;
      const res = await runLoad(app, { ...job, durationMs: o.stallDurationMs, perRequest: true }, [
        {
          atMs: pauseAt,
          run: () => {
            pauseStart = epochNow();
            redis.pause(o.stallPauseMs, o.stallMode).catch(() => undefined);
          },
        },
      ]);
      const pauseEnd = pauseStart + o.stallPauseMs;
      const end = res.startedAt + res.wallMs;
      const loadsIn = (from: number, to: number) =>
        res.loads.filter(([, at]) => at >= from && at < to).length /
        Math.max(1e-9, (to - from) / 1000);
      const before = loadsIn(res.startedAt, pauseStart);
      const during = loadsIn(pauseStart, pauseEnd);
      const after = loadsIn(pauseEnd, Math.min(end, res.startedAt + o.stallDurationMs));
      const lat = (from: number, to: number) =>
        res.latencies!.filter((_, i) => res.arrivals![i] >= from && res.arrivals![i] < to);
      const duringLat = lat(pauseStart, pauseEnd);
      rows.push({
        pattern,
        mode: o.stallMode,
        pause_ms: o.stallPauseMs,
        keys: o.stallKeys,
        rate: o.stallRate,
        reqs: res.reqs,
        loads_per_s_before: round2(before),
        loads_per_s_during: round2(during),
        loads_per_s_after: round2(after),
        ratio: before > 0 ? during / before : Infinity,
        during_reqs: duringLat.length,
        during_p50: q(duringLat, 0.5),
        during_p99: q(duringLat, 0.99),
        during_max: round2(Math.max(0, ...duringLat)),
        before_p99: q(lat(res.startedAt, pauseStart), 0.99),
        store_errors: res.counters.storeErrors,
      });
      // The next pattern starts on a store out of its cool-down.
      await sleep(o.cooldownMs + 100);
    }
  } finally {
    await app.close();
    await redis.stop();
  }
  ctx.log(renderTable(STALL_COLUMNS, rows));
  logTargets(ctx, stallTargets(rows, o));
  return rows;
}

/**
 * A timer never fires early, and a request that meets one timed-out Redis call and then one
 * load takes setTimeout(operationTimeout) + setTimeout(backend) plus the event loop's delay:
 * the p99 bound allows 10 ms of that on top of operationTimeout + backend.
 */
const TIMER_SLACK_MS = 10;

function stallTargets(rows: StallRow[], o: BenchOptions): Target[] {
  const sf = rows.find((r) => r.pattern === 'singleflight');
  const bound = o.operationTimeoutMs + o.backendMs;
  return rows.map((r) => ({
    id: 'stall',
    text: `${r.pattern}: Redis paused (${r.mode}) ${r.pause_ms} ms: backend calls/s during <= 1.2x before, p99 of requests during <= operationTimeout + backend (${bound} ms, + ${TIMER_SLACK_MS} ms timer slack)`,
    met: r.ratio <= 1.2 && r.during_p99 <= bound + TIMER_SLACK_MS,
    measured:
      `${r.loads_per_s_during.toFixed(1)} vs ${r.loads_per_s_before.toFixed(1)}/s = ${r.ratio.toFixed(2)}x, p99 ${r.during_p99} ms` +
      (sf && sf !== r ? ` (singleflight ${sf.ratio.toFixed(2)}x, ${sf.during_p99} ms)` : ''),
  }));
}

// --- hotset -------------------------------------------------------------------------------

export interface HotsetRow {
  pattern: PatternName;
  instances: number;
  keys: number;
  zipf: number;
  rate: number;
  ttl_ms: number;
  backend_ms: number;
  duration_ms: number;
  reqs: number;
  loads: number;
  blocking_pct: number;
  early_recomputes: number;
  lock_waits: number;
  /** Library commands of the measured run (commandstats, script-internal commands included). */
  cmds: number;
  cmds_per_req: number;
  /** Store reads that found a value (estimated from the metrics, see hitReads). */
  hit_reads: number;
  /** (cmds - hit_reads x cmds_per_hit) / loads. */
  cmds_per_load: number;
  /** Probe: a sweep of warm keys, every call a hit: commands / store reads. */
  cmds_per_hit: number;
  /** Probe: a sweep of cold keys, every call a miss and a load: commands / loads. */
  cmds_per_cold_load: number;
  /** Loads per key per TTL, averaged over the hottest keys, and the most for one key. */
  hot_keys: number;
  loads_per_hot_key_per_ttl: number;
  max_loads_key_per_ttl: number;
  double_refreshes: number;
  p50: number;
  p99: number;
  store_errors: number;
  commands: CommandCounts;
}

export const HOTSET_COLUMNS: Column<HotsetRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'inst', value: (r) => r.instances },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads', value: (r) => r.loads },
  { header: 'blocking%', value: (r) => `${r.blocking_pct.toFixed(2)}%` },
  { header: 'early', value: (r) => r.early_recomputes },
  { header: 'lock_waits', value: (r) => r.lock_waits },
  { header: 'cmds', value: (r) => r.cmds },
  { header: 'cmds/req', value: (r) => r.cmds_per_req, digits: 3 },
  { header: 'cmds/load', value: (r) => r.cmds_per_load, digits: 2 },
  { header: 'cmds/hit', value: (r) => r.cmds_per_hit, digits: 3 },
  { header: 'cmds/cold_load', value: (r) => r.cmds_per_cold_load, digits: 2 },
  { header: 'loads/key/ttl(top)', value: (r) => r.loads_per_hot_key_per_ttl, digits: 3 },
  { header: 'max_loads/key/ttl', value: (r) => r.max_loads_key_per_ttl, digits: 2 },
  { header: 'double_refresh', value: (r) => r.double_refreshes },
  { header: 'p50_ms', value: (r) => r.p50, digits: 2 },
  { header: 'p99_ms', value: (r) => r.p99, digits: 2 },
  { header: 'store_err', value: (r) => r.store_errors },
];

/**
 * Calls whose own store read found a value: flights (calls - joins) minus the flights that
 * missed, and each missed flight either loaded (loads - earlyRecomputes: early recomputations
 * load in the background, not in a flight) or waited for another holder's lock (lockWaits).
 * A flight that missed and joined an early recomputation already loading is counted as a hit
 * read (rare: the value expired during that load).
 */
function hitReads(c: {
  calls: number;
  joins: number;
  loads: number;
  earlyRecomputes: number;
  lockWaits: number;
}): number {
  const missFlights = Math.max(0, c.loads - c.earlyRecomputes) + c.lockWaits;
  return Math.max(0, c.calls - c.joins - missFlights);
}

export async function hotset(ctx: ScenarioContext): Promise<HotsetRow[]> {
  const o = ctx.opts;
  const k = Math.max(1, o.hotsetInstances);
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## hotset: ${redis.describe()}; ${o.hotsetKeys} keys, Zipf s=${o.hotsetZipf}, Poisson ${o.hotsetRate} req/s` +
      `${k > 1 ? ` over ${k} forked instances` : ' in this process'}, TTL ${o.hotsetTtlMs} ms, backend ${o.hotsetBackendMs} ms, ` +
      `${o.hotsetDurationMs} ms measured after ${o.hotsetWarmupMs} ms of warm-up; probes: ${o.hotsetProbeKeys} cold keys once (misses), then again (hits); ` +
      `commands from INFO commandstats (commands inside scripts included)`,
  );
  const instances = await startInstances(
    ctx.config(o.hotsetTtlMs, {
      redisUrl: redis.url,
      backendMs: o.hotsetBackendMs,
      recordLoads: true,
      operationTimeout: o.operationTimeoutMs,
      cooldown: o.cooldownMs,
    }),
    k,
  );
  const rows: HotsetRow[] = [];
  const hot = Math.min(o.hotsetHotKeys, o.hotsetKeys);
  try {
    for (const pattern of o.hotsetPatterns) {
      const probe: LoadJob = {
        pattern,
        keyPrefix: `hs-probe:${pattern}:`,
        keys: o.hotsetProbeKeys,
        zipf: 0,
        mode: 'sweep',
        concurrency: 20,
      };
      // Load the scripts (EVALSHA's first NOSCRIPT + EVAL) before anything is counted.
      await instances[0].load({ ...probe, keyPrefix: `hs-prime:${pattern}:`, keys: 1 });
      const s0 = await redis.commandCounts();
      const cold = await instances[0].load(probe);
      const s1 = await redis.commandCounts();
      const warm = await instances[0].load(probe);
      const s2 = await redis.commandCounts();
      const coldCmds = totalCommands(commandDelta(s1, s0));
      const warmCmds = totalCommands(commandDelta(s2, s1));
      const warmReads = hitReads(warm.counters);
      const cmdsPerHit = warmReads > 0 ? warmCmds / warmReads : NaN;

      const job: LoadJob = {
        pattern,
        keyPrefix: `hs:${pattern}:`,
        keys: o.hotsetKeys,
        zipf: o.hotsetZipf,
        mode: 'poisson',
        rate: o.hotsetRate / k,
        durationMs: o.hotsetWarmupMs,
      };
      const run = await warmAndMeasure(instances, redis, job, o.hotsetDurationMs, {
        perRequest: true,
      });
      const { results, commands, cmds, reqs, loads, perKey } = run;
      const c = run.counters;
      const reads = hitReads(c);
      const ttls = o.hotsetDurationMs / o.hotsetTtlMs;
      let hotLoads = 0;
      for (let r = 0; r < hot; r++) hotLoads += perKey.get(`${job.keyPrefix}${r}`) ?? 0;
      const latencies = results.flatMap((r) => r.latencies ?? []);
      rows.push({
        pattern,
        instances: k,
        keys: o.hotsetKeys,
        zipf: o.hotsetZipf,
        rate: o.hotsetRate,
        ttl_ms: o.hotsetTtlMs,
        backend_ms: o.hotsetBackendMs,
        duration_ms: o.hotsetDurationMs,
        reqs,
        loads: c.loads,
        blocking_pct: c.calls ? (100 * c.misses) / c.calls : 0,
        early_recomputes: c.earlyRecomputes,
        lock_waits: c.lockWaits,
        cmds,
        cmds_per_req: cmds / reqs,
        hit_reads: reads,
        cmds_per_load: c.loads ? (cmds - reads * (cmdsPerHit || 1)) / c.loads : NaN,
        cmds_per_hit: cmdsPerHit,
        cmds_per_cold_load: cold.counters.loads ? coldCmds / cold.counters.loads : NaN,
        hot_keys: hot,
        loads_per_hot_key_per_ttl: hotLoads / hot / ttls,
        max_loads_key_per_ttl: Math.max(0, ...perKey.values()) / ttls,
        double_refreshes: doubleRefreshes(loads, o.hotsetTtlMs / 2),
        p50: q(latencies, 0.5),
        p99: q(latencies, 0.99),
        store_errors: c.storeErrors + cold.counters.storeErrors + warm.counters.storeErrors,
        commands,
      });
    }
  } finally {
    await Promise.all(instances.map((i) => i.close()));
    await redis.stop();
  }
  ctx.log(renderTable(HOTSET_COLUMNS, rows));
  ctx.log(
    `\nhotset: commandstats of the measured run by command (calls; commands inside scripts counted under their own name)`,
  );
  ctx.log(
    renderCommandBreakdown(
      rows.map((r) => ({
        name: r.pattern,
        commands: r.commands,
        cmds: r.cmds,
        perRequest: r.cmds_per_req,
        perLoad: r.cmds_per_load,
      })),
    ),
  );
  logTargets(ctx, hotsetTargets(rows));
  return rows;
}

function hotsetTargets(rows: HotsetRow[]): Target[] {
  const sf = rows.find((r) => r.pattern === 'singleflight');
  const ref = (f: (r: HotsetRow) => string) => (sf ? ` (singleflight ${f(sf)})` : '');
  const targets: Target[] = [];
  for (const r of rows.filter((x) => x.pattern !== 'singleflight')) {
    targets.push(
      {
        id: 'hotset',
        text: `${r.pattern}: <= 4 Redis commands per load, lock included`,
        met: r.cmds_per_load <= 4,
        measured: `${r.cmds_per_load.toFixed(2)} (cold-key probe ${r.cmds_per_cold_load.toFixed(2)})${ref((s) => s.cmds_per_load.toFixed(2))}`,
      },
      {
        id: 'hotset',
        text: `${r.pattern}: exactly 1 Redis command per hit`,
        met: Math.abs(r.cmds_per_hit - 1) < 1e-9,
        measured: `${r.cmds_per_hit.toFixed(3)}${ref((s) => s.cmds_per_hit.toFixed(3))}`,
      },
      {
        id: 'hotset',
        text: `${r.pattern}: <= 2.2 Redis commands per request`,
        met: r.cmds_per_req <= 2.2,
        measured: `${r.cmds_per_req.toFixed(3)}${ref((s) => s.cmds_per_req.toFixed(3))}`,
      },
      {
        id: 'hotset',
        text: `${r.pattern}: <= 1 load per key per TTL (top ${r.hot_keys} keys, tolerance 5%), no double refresh`,
        met: r.loads_per_hot_key_per_ttl <= 1.05 && r.double_refreshes === 0,
        measured: `${r.loads_per_hot_key_per_ttl.toFixed(3)}, max ${r.max_loads_key_per_ttl.toFixed(2)}, double ${r.double_refreshes}${ref((s) => s.loads_per_hot_key_per_ttl.toFixed(3))}`,
      },
    );
  }
  return targets;
}

// --- fanout -------------------------------------------------------------------------------

export interface FanoutRow {
  pattern: PatternName;
  /** 1..K, or 'all' for the cluster. */
  instance: string;
  reqs: number;
  loads: number;
  lock_waits: number;
  lock_wait_ms: number;
  /** Fill notifications this instance's store received (null: the library has no counter). */
  notifications: number | null;
  /** 'all' only: PUBLISH commands on the server (fills and releases that notified). */
  publishes: number | null;
  p99: number;
}

export const FANOUT_COLUMNS: Column<FanoutRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'instance', value: (r) => r.instance },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads(fills)', value: (r) => r.loads },
  { header: 'lock_waits', value: (r) => r.lock_waits },
  { header: 'lock_wait_ms', value: (r) => r.lock_wait_ms, digits: 1 },
  { header: 'notifications_received', value: (r) => r.notifications ?? 'n/a' },
  {
    header: 'notif/lock_wait',
    value: (r) =>
      r.notifications === null
        ? 'n/a'
        : r.lock_waits > 0
          ? (r.notifications / r.lock_waits).toFixed(2)
          : r.notifications === 0
            ? '0'
            : 'inf',
  },
  { header: 'publishes', value: (r) => r.publishes },
  { header: 'p99_ms', value: (r) => r.p99, digits: 2 },
];

export async function fanout(ctx: ScenarioContext): Promise<FanoutRow[]> {
  const o = ctx.opts;
  const k = Math.max(2, o.fanoutInstances);
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## fanout: ${redis.describe()}; ${k} forked instances, ${o.fanoutKeys} keys, Zipf s=${o.fanoutZipf}, Poisson ${o.fanoutRate} req/s in all ` +
      `(${Math.round(o.fanoutRate / k)} per instance), TTL ${o.fanoutTtlMs} ms, backend ${o.fanoutBackendMs} ms, ${o.fanoutDurationMs} ms measured after ` +
      `${o.fanoutWarmupMs} ms of warm-up; notifications = the store's notificationsReceived`,
  );
  const instances = await startInstances(
    ctx.config(o.fanoutTtlMs, {
      redisUrl: redis.url,
      backendMs: o.fanoutBackendMs,
      operationTimeout: o.operationTimeoutMs,
      cooldown: o.cooldownMs,
    }),
    k,
  );
  const rows: FanoutRow[] = [];
  try {
    for (const pattern of o.fanoutPatterns) {
      const job: LoadJob = {
        pattern,
        keyPrefix: `fan:${pattern}:`,
        keys: o.fanoutKeys,
        zipf: o.fanoutZipf,
        mode: 'poisson',
        rate: o.fanoutRate / k,
        durationMs: o.fanoutWarmupMs,
      };
      await Promise.all(instances.map((i) => i.load({ ...job, startAt: Date.now() + 50 })));
      const s0 = await redis.commandCounts();
      const startAt = Date.now() + 50;
      const results: LoadResult[] = await Promise.all(
        instances.map((i) =>
          i.load({ ...job, durationMs: o.fanoutDurationMs, startAt, perRequest: true }),
        ),
      );
      const s1 = await redis.commandCounts();
      const row = (instance: string, list: LoadResult[]): FanoutRow => {
        const c = sumCounters(list.map((r) => r.counters));
        const notes = list.map((r) => r.notifications);
        return {
          pattern,
          instance,
          reqs: list.reduce((a, r) => a + r.reqs, 0),
          loads: c.loads,
          lock_waits: c.lockWaits,
          lock_wait_ms: round2(c.lockWaitMs),
          notifications: notes.some((n) => n === null)
            ? null
            : notes.reduce<number>((a, n) => a + (n ?? 0), 0),
          publishes: null,
          p99: q(
            list.flatMap((r) => r.latencies ?? []),
            0.99,
          ),
        };
      };
      results.forEach((r, i) => rows.push(row(String(i + 1), [r])));
      rows.push({ ...row('all', results), publishes: commandDelta(s1, s0).publish ?? 0 });
    }
  } finally {
    await Promise.all(instances.map((i) => i.close()));
    await redis.stop();
  }
  ctx.log(renderTable(FANOUT_COLUMNS, rows));
  logTargets(ctx, fanoutTargets(rows));
  return rows;
}

function fanoutTargets(rows: FanoutRow[]): Target[] {
  const targets: Target[] = [];
  for (const pattern of [...new Set(rows.map((r) => r.pattern))]) {
    if (!LOCK_PATTERNS.includes(pattern)) continue;
    const per = rows.filter((r) => r.pattern === pattern && r.instance !== 'all');
    const all = rows.find((r) => r.pattern === pattern && r.instance === 'all')!;
    const text = `${pattern}: fill notifications received per instance <= its own lockWaits (+5% +5), not the cluster's fills`;
    if (per.some((r) => r.notifications === null)) {
      targets.push({
        id: 'fanout',
        text,
        met: null,
        measured: `n/a (this library has no RedisStore.notificationsReceived); cluster fills ${all.loads}, publishes ${all.publishes}`,
      });
      continue;
    }
    targets.push({
      id: 'fanout',
      text,
      met: per.every((r) => r.notifications! <= r.lock_waits * 1.05 + 5),
      measured:
        per.map((r) => `#${r.instance} ${r.notifications} vs ${r.lock_waits}`).join(', ') +
        `; cluster fills ${all.loads}, publishes ${all.publishes}`,
    });
  }
  return targets;
}

// --- warnings -----------------------------------------------------------------------------

/** Nest logger of the warnings scenario: keeps the library's lines instead of printing them. */
export class CaptureLogger extends ConsoleLogger {
  readonly lines: { level: LogLevel; context: string; message: string }[] = [];
  capturing = true;

  private keep(level: LogLevel, message: unknown, rest: unknown[]): boolean {
    if (!this.capturing) return false;
    const context = typeof rest[rest.length - 1] === 'string' ? String(rest[rest.length - 1]) : '';
    this.lines.push({ level, context, message: String(message) });
    return true;
  }

  override warn(message: unknown, ...rest: unknown[]): void {
    if (!this.keep('warn', message, rest)) super.warn(message, ...rest);
  }

  override error(message: unknown, ...rest: unknown[]): void {
    if (!this.keep('error', message, rest)) super.error(message, ...rest);
  }

  override log(message: unknown, ...rest: unknown[]): void {
    if (!this.capturing) super.log(message, ...rest);
  }
}

export interface WarningsRow {
  pattern: PatternName;
  processes: number;
  keys: number;
  rate: number;
  duration_ms: number;
  fail_rate: number;
  reqs: number;
  loads: number;
  loader_errors: number;
  /** Calls that rejected with a loader error. */
  caller_errors: number;
  early_recomputes: number;
  /** Loader errors that reached no caller: failed early recomputations (background). */
  failed_early: number;
  /** "early recomputation ... failed" lines the library logged, and its other warnings. */
  warning_lines: number;
  other_warnings: number;
  /** At most 1 line per 10 s per process. */
  allowed_lines: number;
  sample: string | null;
}

export const WARNINGS_COLUMNS: Column<WarningsRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'procs', value: (r) => r.processes },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads', value: (r) => r.loads },
  { header: 'loader_errors', value: (r) => r.loader_errors },
  { header: 'caller_errors', value: (r) => r.caller_errors },
  { header: 'early_recomputes', value: (r) => r.early_recomputes },
  { header: 'failed_early', value: (r) => r.failed_early },
  { header: 'early_warning_lines', value: (r) => r.warning_lines },
  { header: 'other_warnings', value: (r) => r.other_warnings },
  { header: 'allowed_lines', value: (r) => r.allowed_lines },
];

export async function warnings(ctx: ScenarioContext): Promise<WarningsRow[]> {
  const o = ctx.opts;
  ctx.log(
    `\n## warnings: loader failing ${(o.warnFailRate * 100).toFixed(0)} % of the time, Poisson ${o.warnRate} req/s over ${o.warnKeys} keys (uniform), ` +
      `TTL ${o.warnTtlMs} ms, backend ${o.backendMs} ms, beta ${o.beta}, ${o.warnDurationMs} ms per pattern, one fresh app (1 process) each; ` +
      `the library's Nest logger lines captured`,
  );
  const rows: WarningsRow[] = [];
  const capture = new CaptureLogger();
  try {
    for (const pattern of o.warnPatterns) {
      const app = await BenchApp.create(
        ctx.config(o.warnTtlMs, { failRate: o.warnFailRate }),
        capture,
      );
      const from = capture.lines.length;
      const f0 = app.backend.failures;
      let res: LoadResult;
      try {
        res = await runLoad(app, {
          pattern,
          keyPrefix: `warn:${pattern}:`,
          keys: o.warnKeys,
          zipf: 0,
          mode: 'poisson',
          rate: o.warnRate,
          durationMs: o.warnDurationMs,
        });
        await sleep(o.backendMs + 100); // recomputations started at the end finish and log
      } finally {
        await app.close();
      }
      const failures = app.backend.failures - f0;
      const seen = new Set(res.errorIdsSeen);
      let unseen = 0;
      for (let id = f0 + 1; id <= f0 + failures; id++) if (!seen.has(id)) unseen++;
      const lines = capture.lines.slice(from).filter((l) => l.level === 'warn');
      const early = lines.filter((l) => /early recomputation/.test(l.message));
      rows.push({
        pattern,
        processes: 1,
        keys: o.warnKeys,
        rate: o.warnRate,
        duration_ms: o.warnDurationMs,
        fail_rate: o.warnFailRate,
        reqs: res.reqs,
        loads: res.counters.loads,
        loader_errors: failures,
        caller_errors: res.callerErrors,
        early_recomputes: res.counters.earlyRecomputes,
        failed_early: unseen,
        warning_lines: early.length,
        other_warnings: lines.length - early.length,
        allowed_lines: Math.max(1, Math.ceil(o.warnDurationMs / 10_000)),
        sample: early[0]?.message ?? null,
      });
    }
  } finally {
    capture.capturing = false;
    // Later apps of this process log to the console again, errors and warnings only.
    Logger.overrideLogger(new ConsoleLogger({ logLevels: ['error', 'warn'] }));
  }
  ctx.log(renderTable(WARNINGS_COLUMNS, rows));
  for (const r of rows) if (r.sample) ctx.log(`${r.pattern}: first line: ${r.sample}`);
  logTargets(ctx, warningsTargets(rows));
  return rows;
}

function warningsTargets(rows: WarningsRow[]): Target[] {
  const sf = rows.find((r) => r.pattern === 'singleflight');
  return rows
    .filter((r) => r.pattern !== 'singleflight')
    .map((r) => ({
      id: 'warnings',
      text: `${r.pattern}: <= 1 "early recomputation failed" line per 10 s per process`,
      met: r.warning_lines <= r.allowed_lines * r.processes,
      measured:
        `${r.warning_lines} line(s) in ${r.duration_ms} ms for ${r.failed_early} failed early recomputation(s)` +
        (sf ? ` (singleflight: ${sf.warning_lines})` : ''),
    }));
}

/** Every resilience target, from a report (the final targets section). */
export function resilienceTargets(report: BenchReport): Target[] {
  const o = report.options as BenchOptions;
  return [
    ...lateLockTargets(report.lateLock, o),
    ...stallTargets(report.stall, o),
    ...hotsetTargets(report.hotset),
    ...fanoutTargets(report.fanout),
    ...warningsTargets(report.warnings),
  ];
}
