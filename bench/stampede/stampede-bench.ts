/*
 * The cache-stampede benchmark: the article's cliff experiment plus steady (Poisson) and
 * snowstorm scenarios against a real Redis, with @nest-redis-resilience/stampede; the resilience
 * scenarios (late-lock, stall, hotset, fanout, warnings) and the tiers scenarios (l1-hotset,
 * grace-failing, l1-stall) on a private redis-server; otel; batch. One file per scenario (or two
 * close ones), each with its rows, table and targets; this file runs the chosen ones and gathers
 * the report. Entry point: main.ts.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { collectEnvInfo, formatEnvInfo, gitRevision } from '../shared/env-info';
import { deleteKeys } from '../shared/redis-stats';
import { formatTargetLine, Target } from '../shared/targets';
import { batchLoads } from './batch';
import { cliffScenario } from './cliff';
import { ScenarioContext } from './scenario';
import { CpuBurn } from './cpu-burn';
import { fanout, warnings } from './fanout-warnings';
import { graceFailing, l1Stall } from './grace-l1-stall';
import { hotset } from './hotset';
import { l1Hotset } from './l1-hotset';
import { lateLock, stall } from './late-lock-stall';
import { BenchOptions, DEFAULT_OPTIONS, Scenario, scenariosOf } from './options';
import { otelCost } from './otel';
import { snowstorm, steady } from './steady-snowstorm';

/** The sections of the report: the scenario that fills each, and how it runs. */
const SECTIONS = {
  cliff: ['cliff', cliffScenario],
  steady: ['steady', steady],
  snowstorm: ['snowstorm', snowstorm],
  lateLock: ['late-lock', lateLock],
  stall: ['stall', stall],
  hotset: ['hotset', hotset],
  fanout: ['fanout', fanout],
  warnings: ['warnings', warnings],
  l1Hotset: ['l1-hotset', l1Hotset],
  graceFailing: ['grace-failing', graceFailing],
  l1Stall: ['l1-stall', l1Stall],
  otel: ['otel', otelCost],
  batch: ['batch', batchLoads],
} as const satisfies Record<string, [Scenario, (ctx: ScenarioContext) => Promise<object[]>]>;

/** Each section: the rows of its scenario ([] when it did not run). */
type Sections = {
  [K in keyof typeof SECTIONS]: Awaited<ReturnType<(typeof SECTIONS)[K][1]>>;
};

export type BenchReport = {
  startedAt: string;
  env: Awaited<ReturnType<typeof collectEnvInfo>>;
  /** libraryRevision(): the commit of libs/stampede measured. */
  library: string;
  /** Busy-loop processes that ran beside the benchmark (--cpu-burn). */
  cpuBurn: number;
  options: Omit<BenchOptions, 'redisUrl'>;
  prefix: string;
} & Sections & { targets: Target[] };

/**
 * The library measured: the last commit that changed libs/stampede (the commit of main it came
 * from when merged), the checkout's HEAD, and whether libs/stampede has uncommitted changes.
 */
function libraryRevision(): string {
  const root = join(__dirname, '..', '..');
  const r = spawnSync('git', ['-C', root, 'log', '-1', '--format=%h', '--', 'libs/stampede'], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  const lib = r.status === 0 ? r.stdout.trim() : 'unknown';
  return `libs/stampede at ${lib} (checkout ${gitRevision(['libs/stampede'])})`;
}

const PACKAGES = ['@nestjs/core', '@nestjs/common', 'ioredis', 'typescript'];

export async function runStampedeBench(
  options: Partial<BenchOptions> & { redisUrl: string },
  log: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
): Promise<BenchReport> {
  const o: BenchOptions = { ...DEFAULT_OPTIONS, ...options };
  const prefix = `bench:stampede:${Date.now().toString(36)}:${randomBytes(3).toString('hex')}:`;
  const control = new Redis(o.redisUrl, { maxRetriesPerRequest: 1 });
  const { redisUrl: _url, ...rest } = o;
  const scenarios = scenariosOf(o.scenario);
  const entries = Object.entries(SECTIONS);
  const sections: Record<string, object[]> = Object.fromEntries(entries.map(([k]) => [k, []]));
  const report = {
    startedAt: new Date().toISOString(),
    env: await collectEnvInfo(control, o.redisUrl, PACKAGES),
    library: libraryRevision(),
    cpuBurn: o.cpuBurn,
    options: rest,
    prefix,
    ...sections,
    targets: [] as Target[],
  };
  const burn = CpuBurn.start(o.cpuBurn);
  log(formatEnvInfo(report.env));
  log(`${report.library}; scenarios ${scenarios.join(', ')}; ${burn.describe()}`);
  log(
    `key prefix ${prefix} (deleted at the end); INFO commandstats is server-wide: run on an otherwise idle Redis`,
  );
  const ctx: ScenarioContext = {
    opts: o,
    log,
    prefix,
    control,
    targets: report.targets,
    config: (ttlMs, extra = {}, redis) => ({
      redisUrl: o.redisUrl,
      prefix,
      ttlMs,
      backendMs: o.backendMs,
      lockTtlMs: o.lockTtlMs,
      pollMs: o.pollMs,
      beta: o.beta,
      jitter: o.jitter,
      ...(redis
        ? { redisUrl: redis.url, operationTimeout: o.operationTimeoutMs, cooldown: o.cooldownMs }
        : {}),
      ...extra,
    }),
  };
  try {
    for (const name of scenarios) {
      const [section, [, run]] = entries.find(([, [scenario]]) => scenario === name)!;
      Object.assign(report, { [section]: await run(ctx) });
    }
    const lines = report.targets.map(formatTargetLine);
    const heading = '\n## targets (what the library must reach; resilience and tiers scenarios)';
    if (lines.length) log([heading, ...lines].join('\n'));
  } finally {
    await burn.stop();
    try {
      await deleteKeys(control, prefix); // this run's keys only
    } finally {
      await control.quit();
    }
  }
  return report as BenchReport;
}
