/*
 * How much CPU processes OUTSIDE the benchmark used while it measured (Linux /proc): on a small
 * machine another process' busy loop changes throughput and tails, and the report should say so.
 * The benchmark's own process and all of its descendants are left out. Processes that start and
 * end between two snapshots are not seen.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** `at`: performance.now(); `ticks`: CPU time of every other process by pid, in clock ticks. */
export type CpuSnapshot = { at: number; ticks: Map<number, number> };

let clockTicks: number | undefined;

/** The kernel's clock ticks per second (the unit of CPU times in /proc). */
export function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    const n = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim());
    clockTicks = n > 0 ? n : 100;
  }
  return clockTicks;
}

/** ppid and utime + stime (clock ticks) of a process, from /proc/<pid>/stat; null when gone. */
function stat(pid: number | string): { ppid: number; ticks: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) };
  } catch {
    return null;
  }
}

/** CPU time (user + system) a process has used so far, ms; undefined without /proc. */
export function processCpuMs(pid: number): number | undefined {
  const s = stat(pid);
  return s ? (s.ticks * 1000) / ticksPerSecond() : undefined;
}

/** A snapshot of the other processes' CPU time, or null where /proc is not there. */
export function snapshotOtherCpu(): CpuSnapshot | null {
  if (!existsSync('/proc/self/stat')) return null;
  const all = new Map<number, { ppid: number; ticks: number }>();
  for (const name of readdirSync('/proc')) {
    const s = /^\d+$/.test(name) ? stat(name) : null;
    if (s) all.set(Number(name), s);
  }
  const children = new Map<number, number[]>();
  for (const [pid, p] of all) children.set(p.ppid, [...(children.get(p.ppid) ?? []), pid]);
  const ours = new Set<number>();
  const stack = [process.pid];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    if (ours.has(pid)) continue;
    ours.add(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  const ticks = new Map<number, number>();
  for (const [pid, p] of all) if (!ours.has(pid)) ticks.set(pid, p.ticks);
  return { at: performance.now(), ticks };
}

/** CPU the other processes seen in both snapshots used between them, % of one core. */
export function otherCpuPercent(
  before: CpuSnapshot | null,
  after: CpuSnapshot | null,
): number | undefined {
  if (!before || !after || after.at <= before.at) return undefined;
  let ticks = 0;
  for (const [pid, t] of after.ticks) {
    const was = before.ticks.get(pid);
    if (was !== undefined && t > was) ticks += t - was;
  }
  return ((ticks / ticksPerSecond()) * 1000 * 100) / (after.at - before.at);
}

/** Rows that ran while other processes used more than this much CPU (% of a core) "shared the machine". */
export const SHARED_CPU_PCT = 10;

/** Waits (at most `maxS` seconds) until processes outside the benchmark leave the CPU. */
export async function waitForQuiet(maxS: number, progress: (line: string) => void): Promise<void> {
  if (maxS <= 0) return;
  const deadline = Date.now() + maxS * 1000;
  for (let told = false; ; told = true) {
    const before = snapshotOtherCpu();
    await new Promise((r) => setTimeout(r, 1000));
    const pct = otherCpuPercent(before, snapshotOtherCpu());
    if (pct === undefined || pct <= SHARED_CPU_PCT) return;
    if (Date.now() >= deadline)
      return progress(
        `  the machine is still busy (others' CPU ${pct.toFixed(0)} %): running anyway`,
      );
    if (!told)
      progress(`  waiting up to ${maxS} s for a quiet machine (others' CPU ${pct.toFixed(0)} %)`);
  }
}
