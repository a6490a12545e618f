/*
 * The cache-stampede benchmark: the article's cliff experiment plus steady (Poisson) and
 * snowstorm scenarios against a real Redis, with @nest-redis-resilience/stampede; the resilience
 * scenarios (late-lock, stall, hotset, fanout, warnings) and the tiers scenarios (l1-hotset,
 * grace-failing, l1-stall) on a private redis-server; otel. One file per scenario (or two close
 * ones), each with its rows, table and targets; this file runs the chosen ones and gathers the
 * report. Entry point: main.ts.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { collectEnvInfo, EnvInfo, formatEnvInfo, gitRevision } from '../shared/env-info';
import { deleteKeys } from '../shared/redis-stats';
import { formatTargetLine, Target } from '../shared/targets';
import { batchLoads, BatchRow } from './batch';
import { BenchConfig } from './patterns';
import { cliff, CliffRow, cliffTargets } from './cliff';
import { ScenarioContext } from './context';
import { CpuBurn } from './cpu-burn';
import {
  fanout,
  FanoutRow,
  fanoutTargets,
  warnings,
  WarningsRow,
  warningsTargets,
} from './fanout-warnings';
import {
  graceFailing,
  graceTargets,
  GraceRow,
  l1Stall,
  L1StallRow,
  l1StallTargets,
} from './grace-l1-stall';
import { hotset, HotsetRow, hotsetTargets } from './hotset';
import { idealLoadsPerRequest, l1Hotset, L1HotsetRow, l1HotsetTargets } from './l1-hotset';
import {
  lateLock,
  LateLockRow,
  lateLockTargets,
  stall,
  StallRow,
  stallTargets,
} from './late-lock-stall';
import { BenchOptions, DEFAULT_OPTIONS, scenariosOf } from './options';
import { otelCost, OtelRow, otelTargets } from './otel';
import { snowstorm, SnowRow, steady, SteadyRow, steadyTargets } from './steady-snowstorm';

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
      control: this.control,
      config: (ttl, extra) => this.config(ttl, extra),
    };
    try {
      if (scenarios.includes('cliff')) {
        const k = o.scenario === 'cliff' ? o.instances : 1;
        report.cliff.push(...(await cliff(ctx, k, o.concurrency)));
        if (o.scenario !== 'cliff' && o.multiInstances > 1) {
          report.cliff.push(...(await cliff(ctx, o.multiInstances, o.multiConcurrency)));
        }
      }
      if (scenarios.includes('steady')) report.steady = await steady(ctx);
      if (scenarios.includes('snowstorm')) report.snowstorm = await snowstorm(ctx);
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

  /** Deletes this run's keys only, then closes the connection. */
  private async cleanup(): Promise<void> {
    try {
      await deleteKeys(this.control, this.prefix);
    } finally {
      await this.control.quit();
    }
  }
}

/** The "What the library must reach" and each scenario's targets, from this run's rows. */
export function evaluateTargets(report: BenchReport): Target[] {
  const o = report.options as BenchOptions;
  const ideal = report.l1Hotset.length
    ? idealLoadsPerRequest(o.l1HotsetKeys, o.l1HotsetZipf, o.l1HotsetRate, o.l1HotsetTtlMs)
    : 0;
  return [
    ...cliffTargets(report.cliff, o.rounds),
    ...steadyTargets(report.steady, report.snowstorm, report.cpuBurn),
    ...lateLockTargets(report.lateLock, o),
    ...stallTargets(report.stall, o),
    ...hotsetTargets(report.hotset),
    ...fanoutTargets(report.fanout),
    ...warningsTargets(report.warnings),
    ...l1HotsetTargets(report.l1Hotset, ideal),
    ...graceTargets(report.graceFailing),
    ...l1StallTargets(report.l1Stall),
    ...otelTargets(report.otel ?? []),
  ];
}

export function formatTargets(targets: Target[]): string {
  return [
    '## targets (what the library must reach; resilience and tiers scenarios)',
    ...targets.map(formatTargetLine),
  ].join('\n');
}

export async function runStampedeBench(
  options: Partial<BenchOptions> & { redisUrl: string },
  log?: (line: string) => void,
): Promise<BenchReport> {
  const opts: BenchOptions = { ...DEFAULT_OPTIONS, ...options };
  return new StampedeBench(opts, log).run();
}
