/*
 * A redis-server of the benchmark's own (test/support/throwaway-redis.ts: a free loopback port,
 * no persistence) for the scenarios that pause Redis (CLIENT PAUSE) or count its commands
 * (INFO commandstats is server-wide): they never pause the shared Redis, and nobody else's
 * commands are counted.
 */
import { Redis } from 'ioredis';
import { parseInfo } from '../shared/env-info';
import { ThrowawayRedis } from '../../test/support/throwaway-redis';

/** Calls per command name from `INFO commandstats` (`get`, `evalsha`, `client|pause`, ...). */
export type CommandCounts = Record<string, number>;

/** Commands the benchmark itself sends to the private server: never counted as the library's. */
const OWN_COMMANDS = /^(info|client\|.*|config\|.*|exists)$/;

export class PrivateRedis {
  private constructor(
    private readonly server: ThrowawayRedis,
    /** The bench's own connection (INFO, CLIENT PAUSE, EXISTS). */
    readonly control: Redis,
    readonly version: string,
  ) {}

  static async start(): Promise<PrivateRedis> {
    const server = await ThrowawayRedis.start();
    const control = new Redis(server.url, { maxRetriesPerRequest: 1 });
    control.on('error', () => undefined);
    const info = parseInfo(await control.info('server'));
    return new PrivateRedis(server, control, info.redis_version ?? 'unknown');
  }

  get url(): string {
    return this.server.url;
  }

  get port(): number {
    return this.server.port;
  }

  describe(): string {
    return `private redis-server ${this.version} on 127.0.0.1:${this.port}`;
  }

  async commandCounts(): Promise<CommandCounts> {
    const text = await this.control.info('commandstats');
    const out: CommandCounts = {};
    for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]] = Number(m[2]);
    return out;
  }

  /** CLIENT PAUSE ms mode: resolves once Redis has started the pause. */
  async pause(ms: number, mode: 'ALL' | 'WRITE'): Promise<void> {
    await this.control.call('CLIENT', 'PAUSE', String(ms), mode);
  }

  async stop(): Promise<void> {
    this.control.disconnect();
    await this.server.destroy();
  }
}

/**
 * Library commands between two commandstats snapshots, by command, without the commands the
 * benchmark sends itself on its control connection (INFO, CLIENT, CONFIG, EXISTS; the library
 * uses none of them while it serves calls). Commands run inside scripts are counted under their
 * own names (Redis 7), so one EVALSHA of read-or-lock shows as evalsha + get + set (+ pttl).
 */
export function commandDelta(after: CommandCounts, before: CommandCounts): CommandCounts {
  const out: CommandCounts = {};
  for (const [name, calls] of Object.entries(after)) {
    if (OWN_COMMANDS.test(name)) continue;
    const d = calls - (before[name] ?? 0);
    if (d > 0) out[name] = d;
  }
  return out;
}

export function totalCommands(counts: CommandCounts): number {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}
