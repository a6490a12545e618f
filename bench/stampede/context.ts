/*
 * What every scenario of bench:stampede gets: the options, the log, the run's key prefix, the
 * connection to the shared Redis, and the app config for a TTL.
 */
import type { Redis } from 'ioredis';
import { commandStats, totalCalls } from '../shared/redis-stats';
import { quantile } from '../shared/table';
import { formatTargetLine, Target } from '../shared/targets';
import type { BenchConfig } from './patterns';
import type { BenchOptions } from './options';

export interface ScenarioContext {
  opts: BenchOptions;
  log: (line: string) => void;
  /** The run's key prefix (every key of the run starts with it). */
  prefix: string;
  /** The benchmark's own connection to the shared Redis (INFO, EXISTS). */
  control: Redis;
  config(ttlMs: number, extra?: Partial<BenchConfig>): BenchConfig;
}

/** Target lines printed under a scenario's table (the same lines as in the final section). */
export function logTargets(ctx: ScenarioContext, targets: Target[]): void {
  if (targets.length) ctx.log(targets.map(formatTargetLine).join('\n'));
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
export const epochNow = () => performance.timeOrigin + performance.now();

export function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

/** The p quantile of `values` (unsorted), to 2 decimals. */
export function q(values: number[], p: number): number {
  return round2(quantile(Float64Array.from(values).sort(), p));
}

/** Commands the shared Redis has run so far (every client's), without INFO. */
export async function commandsSoFar(redis: Redis): Promise<number> {
  const stats = await commandStats(redis);
  return totalCalls(stats) - (stats.info?.calls ?? 0);
}
