/*
 * The cache-stampede benchmark (issue 3): the article's cliff experiment plus steady (Poisson)
 * and snowstorm scenarios, against a real Redis, with @nest-redis-resilience/stampede; the
 * resilience scenarios of resilience.ts (late-lock, stall, hotset, fanout, warnings) and the
 * tiers scenarios of tiers.ts (l1-hotset, grace-failing, l1-stall) on a private redis-server.
 * Entry point: main.ts.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { collectEnvInfo, EnvInfo, formatEnvInfo, gitRevision } from '../shared/env-info';
import { Column, quantile, renderTable } from '../shared/table';
import {
  BenchApp,
  BenchConfig,
  diffCounters,
  emptyCounters,
  lockKey,
  PatternName,
  valueKey,
} from './bench-app';
import { CpuBurn } from './cpu-burn';
import { Instance, startInstances } from './instances';
import { doubleRefreshes, drive, poissonArrivals } from './load';
import {
  fanout,
  FanoutRow,
  formatTarget,
  hotset,
  HotsetRow,
  lateLock,
  LateLockRow,
  resilienceTargets,
  ScenarioContext,
  stall,
  StallRow,
  warnings,
  WarningsRow,
} from './resilience';
import {
  graceFailing,
  GraceRow,
  l1Hotset,
  L1HotsetRow,
  l1Stall,
  L1StallRow,
  tiersTargets,
} from './tiers';
import { DEFAULT_OTEL_VARIANTS, OTEL_TIERS, otelCost, OtelRow, otelTargets } from './otel';
import type { OtelTier, OtelVariant } from './otel-worker';
import { BatchRow, batchLoads } from './batch';

export { poissonArrivals } from './load';

/** One scenario by name, or a group: `all` (issue 3's), `resilience`, `tiers` (their files'). */
export type Scenario =
  | 'all'
  | 'resilience'
  | 'tiers'
  | 'cliff'
  | 'steady'
  | 'snowstorm'
  | 'late-lock'
  | 'stall'
  | 'hotset'
  | 'fanout'
  | 'warnings'
  | 'l1-hotset'
  | 'grace-failing'
  | 'l1-stall'
  | 'otel'
  | 'batch';

export const SCENARIO_GROUPS: Record<string, Scenario[]> = {
  all: ['cliff', 'steady', 'snowstorm'],
  resilience: ['late-lock', 'stall', 'hotset', 'fanout', 'warnings'],
  tiers: ['l1-hotset', 'grace-failing', 'l1-stall'],
};
export const SCENARIOS: Scenario[] = [
  'all',
  'resilience',
  'tiers',
  'cliff',
  'steady',
  'snowstorm',
  'late-lock',
  'stall',
  'hotset',
  'fanout',
  'warnings',
  'l1-hotset',
  'grace-failing',
  'l1-stall',
  'otel',
  'batch',
];

export interface BenchOptions {
  redisUrl: string;
  /** A scenario or group, or several, comma-separated (`steady,warnings`). */
  scenario: Scenario | string;
  /** Busy-loop processes beside the whole run (--cpu-burn [n]). */
  cpuBurn: number;
  /** The StampedeModule's operationTimeout and cooldown in every app (library defaults). */
  operationTimeoutMs: number;
  cooldownMs: number;
  // cliff (the article's settings)
  cliffPatterns: PatternName[];
  concurrency: number[];
  rounds: number;
  warmup: number;
  ttlMs: number;
  backendMs: number;
  lockTtlMs: number;
  pollMs: number;
  beta: number;
  /** Instances of the cliff scenario (scenario cliff). */
  instances: number;
  /** Scenario all: the extra multi-instance cliff run (0 or 1: none). */
  multiInstances: number;
  multiConcurrency: number[];
  // steady
  steadyPatterns: PatternName[];
  rate: number;
  durationMs: number;
  steadyTtlMs: number;
  // snowstorm
  snowKeys: number;
  snowRate: number;
  snowDurationMs: number;
  snowTtlMs: number;
  jitter: number;
  windowMs: number;
  // late-lock
  latePatterns: PatternName[];
  latePauseMs: number;
  // stall
  stallPatterns: PatternName[];
  stallRate: number;
  stallKeys: number;
  stallTtlMs: number;
  stallDurationMs: number;
  stallWarmupMs: number;
  stallPauseMs: number;
  stallMode: 'ALL' | 'WRITE';
  // hotset
  hotsetPatterns: PatternName[];
  hotsetKeys: number;
  hotsetZipf: number;
  hotsetRate: number;
  hotsetTtlMs: number;
  hotsetBackendMs: number;
  hotsetDurationMs: number;
  hotsetWarmupMs: number;
  hotsetProbeKeys: number;
  hotsetHotKeys: number;
  hotsetInstances: number;
  // fanout
  fanoutPatterns: PatternName[];
  fanoutInstances: number;
  fanoutKeys: number;
  fanoutZipf: number;
  fanoutRate: number;
  fanoutTtlMs: number;
  fanoutBackendMs: number;
  fanoutDurationMs: number;
  fanoutWarmupMs: number;
  // warnings
  warnPatterns: PatternName[];
  warnKeys: number;
  warnRate: number;
  warnTtlMs: number;
  warnFailRate: number;
  warnDurationMs: number;
  // l1-hotset (variants: a pattern, or pattern+l1 for apps with StampedeModule l1: true)
  l1HotsetVariants: string[];
  l1HotsetInstances: number;
  l1HotsetKeys: number;
  l1HotsetZipf: number;
  l1HotsetRate: number;
  l1HotsetTtlMs: number;
  l1HotsetBackendMs: number;
  l1HotsetDurationMs: number;
  l1HotsetWarmupMs: number;
  l1HotsetProbeKeys: number;
  l1HotsetHotKeys: number;
  // grace-failing
  gracePatterns: PatternName[];
  graceKeys: number;
  graceRate: number;
  graceTtlMs: number;
  graceDurationMs: number;
  graceFailRate: number;
  graceMs: number;
  graceBackoffMs: number;
  // l1-stall
  l1StallVariants: string[];
  l1StallKeys: number;
  l1StallRate: number;
  l1StallTtlMs: number;
  l1StallDurationMs: number;
  l1StallPauseMs: number;
  // otel: what the OpenTelemetry instrumentation costs (otel.ts)
  otelVariants: (OtelVariant | 'none')[];
  otelTiers: OtelTier[];
  otelKeys: number;
  otelZipf: number;
  otelConcurrency: number;
  otelWarmupMs: number;
  otelDurationMs: number;
  otelSliceMs: number;
  otelRounds: number;
  /** batch: rounds per row (batch.ts). */
  batchRounds?: number;
}

export const DEFAULT_OPTIONS: Omit<BenchOptions, 'redisUrl'> = {
  scenario: 'all',
  cpuBurn: 0,
  operationTimeoutMs: 500,
  cooldownMs: 1000,
  cliffPatterns: ['naive', 'singleflight', 'xfetch', 'distlock-poll', 'distlock', 'two-tier'],
  concurrency: [100, 500, 1000],
  rounds: 10,
  warmup: 1,
  ttlMs: 80,
  backendMs: 100,
  lockTtlMs: 5000,
  pollMs: 2,
  beta: 1,
  instances: 1,
  multiInstances: 4,
  multiConcurrency: [1000],
  steadyPatterns: ['singleflight', 'xfetch', 'xfetch-uncoalesced'],
  rate: 2000,
  durationMs: 5000,
  steadyTtlMs: 1000,
  snowKeys: 1000,
  snowRate: 10_000,
  snowDurationMs: 3500,
  snowTtlMs: 1000,
  jitter: 0.1,
  windowMs: 10,
  latePatterns: ['singleflight', 'distlock', 'two-tier', 'two-tier-xfetch'],
  latePauseMs: 1500,
  stallPatterns: ['singleflight', 'two-tier', 'two-tier-xfetch'],
  stallRate: 2000,
  stallKeys: 100,
  stallTtlMs: 1000,
  stallDurationMs: 6000,
  stallWarmupMs: 1000,
  stallPauseMs: 2000,
  stallMode: 'ALL',
  hotsetPatterns: ['singleflight', 'two-tier', 'two-tier-xfetch'],
  hotsetKeys: 10_000,
  hotsetZipf: 1,
  hotsetRate: 5000,
  hotsetTtlMs: 2000,
  hotsetBackendMs: 10,
  hotsetDurationMs: 10_000,
  hotsetWarmupMs: 2000,
  hotsetProbeKeys: 1000,
  hotsetHotKeys: 100,
  hotsetInstances: 1,
  fanoutPatterns: ['singleflight', 'two-tier', 'two-tier-xfetch'],
  fanoutInstances: 3,
  fanoutKeys: 1000,
  fanoutZipf: 1,
  fanoutRate: 3000,
  fanoutTtlMs: 1000,
  fanoutBackendMs: 100,
  fanoutDurationMs: 10_000,
  fanoutWarmupMs: 1000,
  warnPatterns: ['singleflight', 'xfetch', 'two-tier-xfetch'],
  warnKeys: 100,
  warnRate: 2000,
  warnTtlMs: 1000,
  warnFailRate: 0.1,
  warnDurationMs: 5000,
  l1HotsetVariants: ['two-tier-xfetch', 'two-tier-xfetch+l1', 'bento-like'],
  l1HotsetInstances: 4,
  l1HotsetKeys: 10_000,
  l1HotsetZipf: 1,
  l1HotsetRate: 5000,
  l1HotsetTtlMs: 2000,
  l1HotsetBackendMs: 10,
  l1HotsetDurationMs: 10_000,
  l1HotsetWarmupMs: 2000,
  l1HotsetProbeKeys: 1000,
  l1HotsetHotKeys: 100,
  gracePatterns: ['two-tier', 'two-tier-grace'],
  graceKeys: 100,
  graceRate: 2000,
  graceTtlMs: 500,
  graceDurationMs: 8000,
  graceFailRate: 0.1,
  graceMs: 10_000,
  graceBackoffMs: 1000,
  l1StallVariants: ['two-tier-xfetch', 'two-tier-xfetch+l1'],
  l1StallKeys: 100,
  l1StallRate: 2000,
  l1StallTtlMs: 10_000,
  l1StallDurationMs: 5000,
  l1StallPauseMs: 2000,
  otelVariants: [...DEFAULT_OTEL_VARIANTS],
  otelTiers: [...OTEL_TIERS],
  otelKeys: 1000,
  otelZipf: 1,
  otelConcurrency: 64,
  otelWarmupMs: 1000,
  otelDurationMs: 4000,
  otelSliceMs: 200,
  otelRounds: 3,
};

/** The scenarios a --scenario value names (groups expanded), in run order. */
export function scenariosOf(value: string): Scenario[] {
  const wanted = new Set<Scenario>();
  for (const part of value.split(',')) {
    const name = part.trim() as Scenario;
    for (const s of SCENARIO_GROUPS[name] ?? [name]) wanted.add(s);
  }
  return SCENARIOS.filter((s) => wanted.has(s));
}

export interface CliffRow {
  pattern: PatternName;
  instances: number;
  conc: number;
  reqs: number;
  db_calls: number;
  /** db_calls of each measured round. */
  db_calls_per_round: number[];
  /** The article's definition: requests that reached the backend, in % of requests. */
  stampede_pct: number;
  p50: number;
  p99: number;
  p999: number;
  /** Requests per second of wall time, expiry waits between rounds included (as in the article). */
  rps: number;
  lock_contention_ms: number;
  redis_cmds: number;
  redis_cmds_per_req: number;
  store_errors: number;
}

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

export interface Target {
  id: string;
  text: string;
  /** null: could not be measured with this library (printed N/A). */
  met: boolean | null;
  measured: string;
}

export interface BenchReport {
  startedAt: string;
  env: EnvInfo;
  /** libraryRevision(): the commit of libs/stampede measured. */
  library: string;
  /** Busy-loop processes that ran beside the benchmark (--cpu-burn). */
  cpuBurn: number;
  options: Omit<BenchOptions, 'redisUrl'>;
  prefix: string;
  cliff: CliffRow[];
  steady: SteadyRow[];
  snowstorm: SnowRow[];
  lateLock: LateLockRow[];
  stall: StallRow[];
  hotset: HotsetRow[];
  fanout: FanoutRow[];
  warnings: WarningsRow[];
  l1Hotset: L1HotsetRow[];
  graceFailing: GraceRow[];
  l1Stall: L1StallRow[];
  otel: OtelRow[];
  batch: BatchRow[];
  targets: Target[];
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The library measured: the last commit that changed libs/stampede (the commit of main it came
 * from when merged), the checkout's HEAD, and whether libs/stampede has uncommitted changes.
 */
export function libraryRevision(): string {
  const root = join(__dirname, '..', '..');
  const r = spawnSync('git', ['-C', root, 'log', '-1', '--format=%h', '--', 'libs/stampede'], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  const lib = r.status === 0 ? r.stdout.trim() : 'unknown';
  return `libs/stampede at ${lib} (checkout ${gitRevision(['libs/stampede'])})`;
}

/** Sum of `calls` over every command in `INFO commandstats`, and the INFO calls among them. */
async function commandCalls(redis: Redis): Promise<{ total: number; info: number }> {
  const text = await redis.info('commandstats');
  let total = 0;
  let info = 0;
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const calls = Number(m[2]);
    total += calls;
    if (m[1] === 'info') info += calls;
  }
  return { total, info };
}

/** How many commands ran between two snapshots, minus the INFO calls (ours and anybody's). */
function commandCountBetween(
  after: { total: number; info: number },
  before: { total: number; info: number },
): number {
  return after.total - before.total - (after.info - before.info);
}

function sortedCopy(values: number[]): Float64Array {
  return Float64Array.from(values).sort();
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
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

export class StampedeBench {
  private readonly prefix = `bench:stampede:${Date.now().toString(36)}:${randomBytes(3).toString('hex')}:`;
  private readonly control: Redis;

  constructor(
    private readonly opts: BenchOptions,
    private readonly log: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
  ) {
    this.control = new Redis(opts.redisUrl, { maxRetriesPerRequest: 1 });
  }

  private config(ttlMs: number, extra: Partial<BenchConfig> = {}): BenchConfig {
    const o = this.opts;
    return {
      redisUrl: o.redisUrl,
      prefix: this.prefix,
      ttlMs,
      backendMs: o.backendMs,
      lockTtlMs: o.lockTtlMs,
      pollMs: o.pollMs,
      beta: o.beta,
      jitter: o.jitter,
      ...extra,
    };
  }

  async run(): Promise<BenchReport> {
    const o = this.opts;
    const { redisUrl: _url, ...options } = o;
    const scenarios = scenariosOf(o.scenario);
    const report: BenchReport = {
      startedAt: new Date().toISOString(),
      env: await collectEnvInfo(this.control, o.redisUrl, [
        '@nestjs/core',
        '@nestjs/common',
        'ioredis',
        'typescript',
      ]),
      library: libraryRevision(),
      cpuBurn: o.cpuBurn,
      options,
      prefix: this.prefix,
      cliff: [],
      steady: [],
      snowstorm: [],
      lateLock: [],
      stall: [],
      hotset: [],
      fanout: [],
      warnings: [],
      l1Hotset: [],
      graceFailing: [],
      l1Stall: [],
      otel: [],
      batch: [],
      targets: [],
    };
    const burn = CpuBurn.start(o.cpuBurn);
    this.log(formatEnvInfo(report.env));
    this.log(`${report.library}; scenarios ${scenarios.join(', ')}; ${burn.describe()}`);
    this.log(
      `key prefix ${this.prefix} (deleted at the end); INFO commandstats is server-wide: run on an otherwise idle Redis`,
    );
    const ctx: ScenarioContext = {
      opts: o,
      log: this.log,
      prefix: this.prefix,
      config: (ttl, extra) => this.config(ttl, extra),
    };
    try {
      if (scenarios.includes('cliff')) {
        const k = o.scenario === 'cliff' ? o.instances : 1;
        report.cliff.push(...(await this.cliff(k, o.concurrency)));
        if (o.scenario !== 'cliff' && o.multiInstances > 1) {
          report.cliff.push(...(await this.cliff(o.multiInstances, o.multiConcurrency)));
        }
      }
      if (scenarios.includes('steady')) report.steady = await this.steady();
      if (scenarios.includes('snowstorm')) report.snowstorm = await this.snowstorm();
      if (scenarios.includes('late-lock')) report.lateLock = await lateLock(ctx);
      if (scenarios.includes('stall')) report.stall = await stall(ctx);
      if (scenarios.includes('hotset')) report.hotset = await hotset(ctx);
      if (scenarios.includes('fanout')) report.fanout = await fanout(ctx);
      if (scenarios.includes('warnings')) report.warnings = await warnings(ctx);
      if (scenarios.includes('l1-hotset')) report.l1Hotset = await l1Hotset(ctx);
      if (scenarios.includes('grace-failing')) report.graceFailing = await graceFailing(ctx);
      if (scenarios.includes('l1-stall')) report.l1Stall = await l1Stall(ctx);
      if (scenarios.includes('otel')) report.otel = await otelCost(ctx);
      if (scenarios.includes('batch')) report.batch = await batchLoads(ctx);
      report.targets = evaluateTargets(report);
      if (report.targets.length) this.log(`\n${formatTargets(report.targets)}`);
    } finally {
      await burn.stop();
      await this.cleanup();
    }
    return report;
  }

  // --- cliff ------------------------------------------------------------------------------

  private async cliff(k: number, concurrencies: number[]): Promise<CliffRow[]> {
    const o = this.opts;
    this.log(
      `\n## cliff: ${k} instance${k > 1 ? 's (forked processes)' : ' (this process)'}, TTL ${o.ttlMs} ms, backend ${o.backendMs} ms, ` +
        `${o.rounds} rounds + ${o.warmup} warm-up, lock ttl ${o.lockTtlMs} ms, poll ${o.pollMs} ms, beta ${o.beta}`,
    );
    const instances = await startInstances(this.config(o.ttlMs), k);
    const rows: CliffRow[] = [];
    try {
      for (const conc of concurrencies) {
        for (const pattern of o.cliffPatterns) {
          rows.push(await this.cliffRow(instances, pattern, conc));
        }
      }
    } finally {
      await Promise.all(instances.map((i) => i.close()));
    }
    this.log(renderTable(CLIFF_COLUMNS, rows));
    return rows;
  }

  /** Waits until the key's value and lock are gone (the value expired after its TTL). */
  private async waitExpired(key: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while ((await this.control.exists(valueKey(this.prefix, key), lockKey(this.prefix, key))) > 0) {
      if (Date.now() > deadline) throw new Error(`key ${key} did not expire`);
      await sleep(2);
    }
  }

  private async cliffRow(
    instances: Instance[],
    pattern: PatternName,
    conc: number,
  ): Promise<CliffRow> {
    const o = this.opts;
    const k = instances.length;
    const key = `cliff:${pattern}:i${k}:c${conc}`;
    const share = (i: number) => Math.floor(conc / k) + (i < conc % k ? 1 : 0);
    const latencies: number[] = [];
    const perRound: number[] = [];
    const total = emptyCounters();
    let cmds = 0;
    let wallMs = 0;
    for (let r = 0; r < o.warmup + o.rounds; r++) {
      const roundStart = performance.now();
      if (r > 0) await sleep(o.ttlMs);
      await this.waitExpired(key);
      const before = await commandCalls(this.control);
      const startAt = Date.now() + (k > 1 ? 30 : 0);
      const results = await Promise.all(
        instances.map((inst, i) => inst.round({ pattern, key, n: share(i), startAt })),
      );
      const after = await commandCalls(this.control);
      if (r < o.warmup) continue;
      wallMs += performance.now() - roundStart;
      cmds += commandCountBetween(after, before);
      let loads = 0;
      for (const res of results) {
        latencies.push(...res.latencies);
        loads += res.counters.loads;
        total.lockWaitMs += res.counters.lockWaitMs;
        total.storeErrors += res.counters.storeErrors;
      }
      perRound.push(loads);
      total.loads += loads;
    }
    const sorted = sortedCopy(latencies);
    const reqs = latencies.length;
    return {
      pattern,
      instances: k,
      conc,
      reqs,
      db_calls: total.loads,
      db_calls_per_round: perRound,
      stampede_pct: (100 * total.loads) / reqs,
      p50: round2(quantile(sorted, 0.5)),
      p99: round2(quantile(sorted, 0.99)),
      p999: round2(quantile(sorted, 0.999)),
      rps: round2(reqs / (wallMs / 1000)),
      lock_contention_ms: round2(total.lockWaitMs),
      redis_cmds: cmds,
      redis_cmds_per_req: cmds / reqs,
      store_errors: total.storeErrors,
    };
  }

  // --- steady -----------------------------------------------------------------------------

  private async steady(): Promise<SteadyRow[]> {
    const o = this.opts;
    this.log(
      `\n## steady: Poisson arrivals ${o.rate}/s for ${o.durationMs} ms on one key, TTL ${o.steadyTtlMs} ms, ` +
        `backend ${o.backendMs} ms, beta ${o.beta} (key warmed before, not counted)`,
    );
    const app = await BenchApp.create(this.config(o.steadyTtlMs, { recordLoads: true }));
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
        const before = await commandCalls(this.control);
        const wall = await drive(arrivals, (i) => {
          const t0 = performance.now();
          return call(key).then(() => void (latencies[i] = performance.now() - t0));
        });
        const after = await commandCalls(this.control);
        const c = diffCounters(app.counters(pattern), c0);
        const sorted = sortedCopy(latencies);
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
          redis_cmds_per_req: commandCountBetween(after, before) / reqs,
          store_errors: c.storeErrors,
        });
      }
    } finally {
      await app.close();
    }
    this.log(renderTable(STEADY_COLUMNS, rows));
    return rows;
  }

  // --- snowstorm --------------------------------------------------------------------------

  private async snowstorm(): Promise<SnowRow[]> {
    const o = this.opts;
    this.log(
      `\n## snowstorm: ${o.snowKeys} keys written together, then ${o.snowRate} req/s (Poisson, uniform over the keys) ` +
        `for ${o.snowDurationMs} ms, TTL ${o.snowTtlMs} ms, backend ${o.backendMs} ms, @SingleFlight, ` +
        `most loader calls in any ${o.windowMs} ms window`,
    );
    const app = await BenchApp.create(this.config(o.snowTtlMs, { recordLoadTimes: true }));
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
        const before = await commandCalls(this.control);
        await drive(arrivals, (i) => {
          const t0 = performance.now();
          return call(pick[i]).then(() => void (latencies[i] = performance.now() - t0));
        });
        const after = await commandCalls(this.control);
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
          p99: round2(quantile(sortedCopy(latencies), 0.99)),
          redis_cmds_per_req: commandCountBetween(after, before) / arrivals.length,
          store_errors: c.storeErrors,
        });
        // Let this variant's keys expire so the next one starts on a quiet Redis.
        await sleep(o.snowTtlMs * (1 + o.jitter) + 50);
      }
    } finally {
      await app.close();
    }
    this.log(renderTable(SNOW_COLUMNS, rows));
    return rows;
  }

  /** Deletes this run's keys only (SCAN MATCH prefix* + DEL), then closes the connection. */
  private async cleanup(): Promise<void> {
    try {
      let cursor = '0';
      do {
        const [next, keys] = await this.control.scan(
          cursor,
          'MATCH',
          `${this.prefix}*`,
          'COUNT',
          1000,
        );
        if (keys.length) await this.control.del(...keys);
        cursor = next;
      } while (cursor !== '0');
    } finally {
      await this.control.quit();
    }
  }
}

export const CLIFF_COLUMNS: Column<CliffRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'inst', value: (r) => r.instances },
  { header: 'conc', value: (r) => r.conc },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'db_calls', value: (r) => r.db_calls },
  { header: 'stampede%', value: (r) => `${r.stampede_pct.toFixed(2)}%` },
  { header: 'p50_ms', value: (r) => r.p50, digits: 2 },
  { header: 'p99_ms', value: (r) => r.p99, digits: 2 },
  { header: 'p999_ms', value: (r) => r.p999, digits: 2 },
  { header: 'rps', value: (r) => r.rps, digits: 1 },
  { header: 'lock_contention_ms', value: (r) => r.lock_contention_ms, digits: 1 },
  { header: 'redis_cmds_per_req', value: (r) => r.redis_cmds_per_req, digits: 3 },
  { header: 'store_err', value: (r) => r.store_errors },
];

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

const PROTECTED: PatternName[] = [
  'singleflight',
  'xfetch',
  'distlock-poll',
  'distlock',
  'two-tier',
];

/** The issue's "What the library must reach", checked against this run's numbers. */
export function evaluateTargets(report: BenchReport): Target[] {
  const rounds = report.options.rounds;
  const targets: Target[] = [];
  const cliff = (pattern: PatternName, k: number, conc: number) =>
    report.cliff.find((r) => r.pattern === pattern && r.instances === k && r.conc === conc);

  const single = report.cliff.filter((r) => r.instances === 1 && PROTECTED.includes(r.pattern));
  if (single.length) {
    const bad = single.filter((r) => r.db_calls !== rounds);
    targets.push({
      id: '1a',
      text: `every protected pattern: db_calls = ${rounds} at every concurrency (1 instance)`,
      met: bad.length === 0,
      measured: bad.length
        ? bad.map((r) => `${r.pattern}@${r.conc}=${r.db_calls}`).join(', ')
        : 'all equal',
    });
  }
  const multi = [...new Set(report.cliff.filter((r) => r.instances > 1).map((r) => r.instances))];
  for (const k of multi) {
    for (const conc of [
      ...new Set(report.cliff.filter((r) => r.instances === k).map((r) => r.conc)),
    ]) {
      const want: [PatternName, number][] = [
        ['distlock', rounds],
        ['two-tier', rounds],
        ['singleflight', k * rounds],
      ];
      const got = want
        .map(([p, w]) => [p, w, cliff(p, k, conc)?.db_calls] as const)
        .filter(([, , g]) => g !== undefined);
      if (got.length) {
        targets.push({
          id: '1b',
          text: `--instances ${k} at conc ${conc}: distlock and two-tier db_calls = ${rounds}, singleflight = ${k * rounds}`,
          met: got.every(([, w, g]) => g === w),
          measured: got.map(([p, , g]) => `${p}=${g}`).join(', '),
        });
      }
    }
  }
  for (const k of [1, ...multi]) {
    const conc = Math.max(0, ...report.cliff.filter((r) => r.instances === k).map((r) => r.conc));
    const tt = cliff('two-tier', k, conc);
    if (!tt) continue;
    targets.push({
      id: '2a',
      text: `two-tier, ${k} instance(s), conc ${conc}: <= 1.1 Redis commands per request`,
      met: tt.redis_cmds_per_req <= 1.1,
      measured: `${tt.redis_cmds_per_req.toFixed(3)} (distlock-poll: ${cliff('distlock-poll', k, conc)?.redis_cmds_per_req.toFixed(2) ?? '-'})`,
    });
    const sf = cliff('singleflight', k, conc);
    if (sf) {
      targets.push({
        id: '2b',
        text: `two-tier, ${k} instance(s), conc ${conc}: p99 within 10% of singleflight's`,
        met: tt.p99 <= sf.p99 * 1.1,
        measured: `two-tier ${tt.p99} ms vs singleflight ${sf.p99} ms (${((100 * (tt.p99 - sf.p99)) / sf.p99).toFixed(1)}%)`,
      });
    }
    const poll = cliff('distlock-poll', k, conc);
    if (poll) {
      const ratio =
        tt.lock_contention_ms > 0 ? poll.lock_contention_ms / tt.lock_contention_ms : Infinity;
      targets.push({
        id: '2c',
        text: `two-tier, ${k} instance(s), conc ${conc}: lock_contention_ms >= 100x lower than distlock-poll's`,
        met: ratio >= 100,
        measured: `${tt.lock_contention_ms} ms vs ${poll.lock_contention_ms} ms (${Number.isFinite(ratio) ? `${ratio.toFixed(0)}x` : 'two-tier 0'})`,
      });
    }
  }
  const sfSteady = report.steady.find((r) => r.pattern === 'singleflight');
  const xf = report.steady.find((r) => r.pattern === 'xfetch');
  if (sfSteady && xf) {
    const ratio = xf.db_calls / sfSteady.db_calls;
    const un = report.steady.find((r) => r.pattern === 'xfetch-uncoalesced');
    targets.push({
      id: '3',
      text: 'steady: xfetch blocking misses <= 0.5%, loader calls <= 1.5x singleflight, 0 double refreshes',
      met: xf.blocking_pct <= 0.5 && ratio <= 1.5 && xf.double_refreshes === 0,
      measured:
        `blocking ${xf.blocking_pct.toFixed(2)}%, loader ${xf.db_calls} vs ${sfSteady.db_calls} = ${ratio.toFixed(2)}x, ` +
        `double refreshes ${xf.double_refreshes}` +
        (un ? ` (uncoalesced ${(un.db_calls / sfSteady.db_calls).toFixed(2)}x)` : '') +
        (report.cpuBurn ? ` [--cpu-burn ${report.cpuBurn}]` : ''),
    });
  }
  if (report.snowstorm.length === 2) {
    const [plain, jittered] = report.snowstorm;
    const cut = 1 - jittered.max_window_calls / plain.max_window_calls;
    targets.push({
      id: '4',
      text: 'snowstorm: @JitterTtl cuts the worst window of loader calls by >= 30%',
      met: cut >= 0.3,
      measured: `${plain.max_window_calls} -> ${jittered.max_window_calls} (${(100 * cut).toFixed(0)}% less)`,
    });
  }
  targets.push(...resilienceTargets(report));
  targets.push(...tiersTargets(report));
  targets.push(...otelTargets(report));
  return targets;
}

export function formatTargets(targets: Target[]): string {
  return [
    '## targets (issue 3, "What the library must reach"; resilience and tiers scenarios)',
    ...targets.map(formatTarget),
  ].join('\n');
}

export async function runStampedeBench(
  options: Partial<BenchOptions> & { redisUrl: string },
  log?: (line: string) => void,
): Promise<BenchReport> {
  const opts: BenchOptions = { ...DEFAULT_OPTIONS, ...options };
  return new StampedeBench(opts, log).run();
}
