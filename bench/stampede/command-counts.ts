/*
 * The library's Redis commands of a run, by command (INFO commandstats deltas on a private
 * redis-server), and their breakdown as a table.
 */
import { Column, renderTable } from '../shared/table';

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

/** One column of a breakdown: a run's commands by name, and its totals. */
export interface CommandBreakdown {
  name: string;
  commands: CommandCounts;
  cmds: number;
  perRequest: number;
  perLoad?: number;
}

/**
 * The lines of `scenario`'s breakdown by command of several runs side by side: the commands
 * (most called first), then the total, per request and (when given) per load.
 */
export function commandBreakdown(scenario: string, columns: CommandBreakdown[]): string[] {
  const most = (command: string) => Math.max(...columns.map((c) => c.commands[command] ?? 0));
  const names = [...new Set(columns.flatMap((c) => Object.keys(c.commands)))].sort(
    (a, b) => most(b) - most(a),
  );
  type Row = { command: string; calls: Record<string, number | string> };
  const row = (command: string, value: (c: CommandBreakdown) => number | string): Row => ({
    command,
    calls: Object.fromEntries(columns.map((c) => [c.name, value(c)])),
  });
  const rows = names.map((command) => row(command, (c) => c.commands[command] ?? 0));
  rows.push(row('total', (c) => c.cmds));
  rows.push(row('per request', (c) => c.perRequest.toFixed(3)));
  if (columns.some((c) => c.perLoad !== undefined))
    rows.push(row('per load', (c) => c.perLoad?.toFixed(2) ?? '-'));
  const table: Column<Row>[] = [
    { header: 'command', value: (r) => r.command },
    ...columns.map((c) => ({ header: c.name, value: (r: Row) => r.calls[c.name] })),
  ];
  return [
    `\n${scenario}: commandstats of the measured run by command (calls; commands inside scripts counted under their own name)`,
    renderTable(table, rows),
  ];
}
