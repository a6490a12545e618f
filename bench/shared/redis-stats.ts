/*
 * What Redis says about a run: INFO sections as key/value pairs, per-command calls and time
 * (INFO commandstats) and their deltas, and the server's CPU time (INFO CPU).
 */
import type { Redis } from 'ioredis';

/** Parses an `INFO <section>` reply into key/value pairs. */
export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** Per command name (`get`, `evalsha`, `client|pause`, ...): calls and time spent (µs). */
export type CommandStats = Record<string, { calls: number; usec: number }>;

export function parseCommandStats(text: string): CommandStats {
  const out: CommandStats = {};
  for (const [key, value] of Object.entries(parseInfo(text))) {
    const calls = /calls=(\d+)/.exec(value);
    if (!key.startsWith('cmdstat_') || !calls) continue;
    const usec = /usec=(\d+)/.exec(value);
    out[key.slice('cmdstat_'.length)] = { calls: Number(calls[1]), usec: Number(usec?.[1] ?? 0) };
  }
  return out;
}

export async function commandStats(redis: Redis): Promise<CommandStats> {
  return parseCommandStats(await redis.info('commandstats'));
}

/**
 * The commands with new calls between two snapshots, without those `skip` matches (the
 * benchmark's own INFO, ...); `rename` may file a command under another name.
 */
export function diffCommandStats(
  after: CommandStats,
  before: CommandStats,
  skip: (command: string) => boolean = (c) => c === 'info',
  rename: (command: string) => string = (c) => c,
): CommandStats {
  const out: CommandStats = {};
  for (const [k, v] of Object.entries(after)) {
    const calls = v.calls - (before[k]?.calls ?? 0);
    if (calls > 0 && !skip(k)) out[rename(k)] = { calls, usec: v.usec - (before[k]?.usec ?? 0) };
  }
  return out;
}

export const callsOf = (stats: CommandStats): Record<string, number> =>
  Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, v.calls]));

export const totalCalls = (stats: CommandStats): number =>
  Object.values(stats).reduce((a, v) => a + v.calls, 0);

/** CPU time of the redis-server process so far (INFO CPU: user + system, all threads), µs. */
export async function redisCpuUs(redis: Redis): Promise<number> {
  const info = parseInfo(await redis.info('cpu'));
  return (Number(info.used_cpu_user) + Number(info.used_cpu_sys)) * 1e6;
}

/** Deletes the keys under `prefix`. */
export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 5000);
    if (keys.length > 0) await redis.unlink(...keys);
    cursor = next;
  } while (cursor !== '0');
}

/** XINFO GROUPS of a stream's first group as numbers (lag, pending, ...); {} when it has none. */
export async function groupInfo(redis: Redis, stream: string): Promise<Record<string, number>> {
  const [group = []] = (await redis.call('XINFO', 'GROUPS', stream)) as unknown[][];
  const out: Record<string, number> = {};
  for (let i = 0; i + 1 < group.length; i += 2) out[String(group[i])] = Number(group[i + 1]);
  return out;
}
