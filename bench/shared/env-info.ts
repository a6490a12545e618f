import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { parseInfo } from './redis-stats';

/** What the benchmark ran on: printed at the top of every report and stored in its JSON. */
export interface EnvInfo {
  node: string;
  redis: string;
  redisUrl: string;
  packages: Record<string, string>;
  cpus: number;
  cpuModel: string;
  platform: string;
}

const ROOT = join(__dirname, '..', '..');

/** Installed version of a package (from node_modules), or 'not installed'. */
export function packageVersion(name: string): string {
  try {
    const file = join(ROOT, 'node_modules', name, 'package.json');
    return (JSON.parse(readFileSync(file, 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'not installed';
  }
}

/**
 * The commit the code under `paths` was measured at (the library moves between runs):
 * `<short hash>`, `+ uncommitted changes` when `paths` differ from it, 'unknown' outside git.
 */
export function gitRevision(paths: string[]): string {
  const git = (...args: string[]) =>
    spawnSync('git', ['-C', ROOT, ...args], { encoding: 'utf8', timeout: 10_000 });
  const head = git('rev-parse', '--short', 'HEAD');
  if (head.status !== 0) return 'unknown';
  const dirty = git('status', '--porcelain', '--', ...paths);
  const changed = dirty.status === 0 && dirty.stdout.trim() !== '';
  return `${head.stdout.trim()}${changed ? ' + uncommitted changes' : ''}`;
}

export async function collectEnvInfo(
  redis: Redis,
  redisUrl: string,
  packages: string[],
): Promise<EnvInfo> {
  const server = parseInfo(await redis.info('server'));
  const cpus = os.cpus();
  return {
    node: process.version,
    redis: server.redis_version ?? 'unknown',
    redisUrl,
    packages: Object.fromEntries(packages.map((p) => [p, packageVersion(p)])),
    cpus: cpus.length,
    cpuModel: cpus[0]?.model?.trim() ?? 'unknown',
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
  };
}

export function formatEnvInfo(info: EnvInfo): string {
  const pkgs = Object.entries(info.packages).map(([name, v]) => `${name} ${v}`);
  return [
    `node ${info.node} | redis ${info.redis} (${info.redisUrl}) | ${pkgs.join(', ')}`,
    `cpus ${info.cpus} x ${info.cpuModel} | ${info.platform}`,
  ].join('\n');
}
