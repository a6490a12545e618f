/*
 * How much CPU processes OUTSIDE the benchmark used while it measured (Linux /proc): on a small
 * machine another process' busy loop or test run changes throughput and tails, and the report
 * should say so. The benchmark's own process and all of its descendants (forked producers and
 * consumers, its own redis-server) are left out. Processes that start and end between two
 * snapshots are not seen.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

export interface CpuSnapshot {
  /** ms (performance.now()). */
  at: number;
  /** CPU time of every other process, in clock ticks, by pid. */
  ticks: Map<number, number>;
}

let clockTicks: number | undefined;

/** The kernel's clock ticks per second (the unit of CPU times in /proc). */
export function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const n = Number(r.stdout?.trim());
    clockTicks = r.status === 0 && n > 0 ? n : 100;
  }
  return clockTicks;
}

/** pid, ppid, utime + stime (ticks) of every process, from /proc/<pid>/stat. */
function processes(): { pid: number; ppid: number; ticks: number }[] {
  const out: { pid: number; ppid: number; ticks: number }[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // The command name (field 2) may hold spaces and parentheses: split after its last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // fields[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
      out.push({
        pid: Number(name),
        ppid: Number(fields[1]),
        ticks: Number(fields[11]) + Number(fields[12]),
      });
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/** A snapshot of the other processes' CPU time, or null where /proc is not there. */
export function snapshotOtherCpu(): CpuSnapshot | null {
  if (!existsSync('/proc/self/stat')) return null;
  const all = processes();
  const children = new Map<number, number[]>();
  for (const p of all) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p.pid]);
  const ours = new Set<number>();
  const stack = [process.pid];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    if (ours.has(pid)) continue;
    ours.add(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  const ticks = new Map<number, number>();
  for (const p of all) if (!ours.has(p.pid)) ticks.set(p.pid, p.ticks);
  return { at: performance.now(), ticks };
}

/**
 * CPU the other processes used between two snapshots, in % of one core (100 = one core busy).
 * Only processes seen in both snapshots count.
 */
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
  let told = false;
  for (;;) {
    const before = snapshotOtherCpu();
    await new Promise((r) => setTimeout(r, 1000));
    const pct = otherCpuPercent(before, snapshotOtherCpu());
    if (pct === undefined || pct <= SHARED_CPU_PCT) return;
    if (Date.now() >= deadline) {
      progress(`  the machine is still busy (others' CPU ${pct.toFixed(0)} %): running anyway`);
      return;
    }
    if (!told)
      progress(`  waiting up to ${maxS} s for a quiet machine (others' CPU ${pct.toFixed(0)} %)`);
    told = true;
  }
}
