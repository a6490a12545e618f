/*
 * What every scenario of bench:stampede gets (the options, the log, the run's key prefix, the
 * connection to the shared Redis, app configs) and the one way each runs: its heading, its rows
 * (on a private redis-server of its own when it asks for one), its table and its targets.
 */
import type { Redis } from 'ioredis';
import { PrivateRedis } from '../shared/private-redis';
import { commandStats, totalCalls } from '../shared/redis-stats';
import { Column, quantile, renderTable } from '../shared/table';
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
  /** The final list of targets, in run order. */
  targets: Target[];
  /**
   * An app config for a TTL; on `redis` (a private redis-server) with the options'
   * operationTimeout and cooldown.
   */
  config(ttlMs: number, extra?: Partial<BenchConfig>, redis?: PrivateRedis): BenchConfig;
}

export interface ScenarioSpec<Row extends object> {
  /** Starts a private redis-server for the scenario, given to `title` and `rows`. */
  privateRedis?: boolean;
  /** The heading, after `## `. */
  title(redis: PrivateRedis): string;
  rows(redis: PrivateRedis): Promise<Row[]>;
  columns: Column<Row>[];
  /** More lines after the table (a breakdown). */
  after?(rows: Row[]): string[];
  targets?(rows: Row[]): Target[];
  /** Where the targets go: under the table, in the final list, or both (the default). */
  targetsAt?: 'table' | 'list';
}

export async function runScenario<Row extends object>(
  ctx: ScenarioContext,
  spec: ScenarioSpec<Row>,
): Promise<Row[]> {
  // Without privateRedis, title and rows do not read their argument.
  const redis = spec.privateRedis ? await PrivateRedis.start() : (undefined as never);
  let rows: Row[];
  try {
    ctx.log(`\n## ${spec.title(redis)}`);
    rows = await spec.rows(redis);
  } finally {
    await redis?.stop();
  }
  ctx.log(renderTable(spec.columns, rows));
  for (const line of spec.after?.(rows) ?? []) ctx.log(line);
  const targets = spec.targets?.(rows) ?? [];
  if (targets.length && spec.targetsAt !== 'list')
    ctx.log(targets.map(formatTargetLine).join('\n'));
  if (spec.targetsAt !== 'table') ctx.targets.push(...targets);
  return rows;
}

/** `fn` on each item, one after the other. */
export async function eachOf<T, R>(items: T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (const item of items) out.push(await fn(item));
  return out;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

/** The p quantile of `values` (unsorted), to 2 decimals. */
export function q(values: ArrayLike<number>, p: number): number {
  return round2(quantile(Float64Array.from(values).sort(), p));
}

/** Commands the shared Redis has run so far (every client's), without INFO. */
export async function commandsSoFar(redis: Redis): Promise<number> {
  const stats = await commandStats(redis);
  return totalCalls(stats) - (stats.info?.calls ?? 0);
}
