/*
 * Commands per Redis node, from `INFO commandstats` before and after a run (per node: on a
 * Cluster each master counts only what it served). The benchmark's own commands (INFO, and the
 * clients' CLUSTER SLOTS / CLUSTER SHARDS topology refreshes, CLIENT, PING, COMMAND) are left out.
 */
import { Redis } from 'ioredis';
import { CommandStats, commandStats, diffCommandStats, totalCalls } from '../shared/redis-stats';

const NOT_THE_APPS = /^(info|cluster\|.*|client\|.*|ping|command|command\|.*|hello|config\|.*)$/;

async function nodeStats(port: number): Promise<CommandStats> {
  const redis = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await commandStats(redis);
  } finally {
    redis.disconnect();
  }
}

/** The apps' commands a node served between two snapshots; `top`: the busiest, `name calls`. */
function nodeLoad(port: number, before: CommandStats, after: CommandStats) {
  const apps = diffCommandStats(after, before, (name) => NOT_THE_APPS.test(name));
  const byName = Object.entries(apps).sort((a, b) => b[1].calls - a[1].calls);
  const top = byName
    .slice(0, 3)
    .map(([n, c]) => `${n} ${c.calls}`)
    .join(', ');
  const usec = byName.reduce((sum, [, c]) => sum + c.usec, 0);
  return { port, calls: totalCalls(apps), usec, top };
}

export async function snapshot(ports: number[]): Promise<Map<number, CommandStats>> {
  const entries = await Promise.all(ports.map(async (p) => [p, await nodeStats(p)] as const));
  return new Map(entries);
}

/**
 * Per node load between two snapshots, and how it is spread: the busiest node's share of all
 * calls and of the time Redis spent in commands, and (busiest - idlest) / total calls, %.
 */
export function spread(before: Map<number, CommandStats>, after: Map<number, CommandStats>) {
  const nodes = [...after.keys()].map((port) =>
    nodeLoad(port, before.get(port)!, after.get(port)!),
  );
  const totalCalls = nodes.reduce((s, n) => s + n.calls, 0);
  const totalUsec = nodes.reduce((s, n) => s + n.usec, 0);
  const calls = nodes.map((n) => n.calls);
  const pct = (x: number, of: number) => (of > 0 ? (100 * x) / of : 0);
  return {
    nodes,
    totalCalls,
    busiestShare: pct(Math.max(...calls), totalCalls),
    spreadPct: pct(Math.max(...calls) - Math.min(...calls), totalCalls),
    busiestUsecShare: pct(Math.max(...nodes.map((n) => n.usec)), totalUsec),
  };
}
