/*
 * What every scenario of bench:stampede gets (the options, the log, the run's key prefix, the
 * connection to the shared Redis, app configs) and the one way each runs: its heading, its rows
 * (on a private redis-server of its own when it asks for one), its table and its targets; the
 * library's Redis commands of a run, by command (INFO commandstats deltas), and their breakdown.
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

/** Calls per command name from `INFO commandstats` (`get`, `evalsha`, `client|pause`, ...). */
export type CommandCounts = Record<string, number>;

/** Commands the benchmark itself sends to the private server: never counted as the library's. */
const OWN_COMMANDS = /^(info|client\|.*|config\|.*|exists)$/;

/**
 * Library commands between two commandstats snapshots, by command (the library sends none of
 * OWN_COMMANDS while it serves calls). Commands run inside scripts are counted under their own
 * names (Redis 7), so one EVALSHA of read-or-lock shows as evalsha + get + set (+ pttl).
 */
export function commandDelta(after: CommandCounts, before: CommandCounts): CommandCounts {
  const out: CommandCounts = {};
  for (const [name, calls] of Object.entries(after)) {
    const d = calls - (before[name] ?? 0);
    if (d > 0 && !OWN_COMMANDS.test(name)) out[name] = d;
  }
  return out;
}

export function totalCommands(counts: CommandCounts): number {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

/** A run of a breakdown: its commands by name, and its totals. */
type Breakdown = {
  commands: CommandCounts;
  cmds: number;
  cmds_per_req: number;
  cmds_per_load: number;
};

/**
 * The lines of `scenario`'s breakdown by command of several runs side by side, each headed by
 * its `name`: the commands (most called first), then the total, per request and, with
 * `perLoad`, per load.
 */
export function commandBreakdown<R extends Breakdown>(
  scenario: string,
  runs: R[],
  name: (run: R) => string,
  perLoad = false,
): string[] {
  const most = (command: string) => Math.max(...runs.map((c) => c.commands[command] ?? 0));
  const names = [...new Set(runs.flatMap((c) => Object.keys(c.commands)))].sort(
    (a, b) => most(b) - most(a),
  );
  type Row = { command: string; calls: (number | string)[] };
  const row = (command: string, value: (run: R) => number | string): Row => ({
    command,
    calls: runs.map(value),
  });
  const rows = names.map((command) => row(command, (c) => c.commands[command] ?? 0));
  rows.push(row('total', (c) => c.cmds));
  rows.push(row('per request', (c) => c.cmds_per_req.toFixed(3)));
  if (perLoad) rows.push(row('per load', (c) => c.cmds_per_load.toFixed(2)));
  const table: Column<Row>[] = [
    { header: 'command', value: (r) => r.command },
    ...runs.map((run, i) => ({ header: name(run), value: (r: Row) => r.calls[i] })),
  ];
  return [
    `\n${scenario}: commandstats of the measured run by command (calls; commands inside scripts counted under their own name)`,
    renderTable(table, rows),
  ];
}
