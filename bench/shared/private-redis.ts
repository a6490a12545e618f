/*
 * A redis-server of the benchmark's own (support/throwaway-redis.ts: a free loopback port, no
 * persistence): INFO commandstats is server-wide, so a Redis shared with other work would count
 * their commands too, and the scenarios that pause Redis (CLIENT PAUSE) never pause anybody else's.
 */
import { Redis } from 'ioredis';
import { ThrowawayRedis } from '../../support/throwaway-redis';
import { callsOf, CommandStats, commandStats, parseInfo } from './redis-stats';

export class PrivateRedis {
  private constructor(
    private readonly server: ThrowawayRedis,
    /** The benchmark's own connection (INFO, CLIENT PAUSE, EXISTS). */
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

  commandStats(): Promise<CommandStats> {
    return commandStats(this.control);
  }

  async commandCounts(): Promise<Record<string, number>> {
    return callsOf(await this.commandStats());
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

/** `url`, or a PrivateRedis started for the run when there is none; `stop` ends what was started. */
export async function redisFor(
  url: string | undefined,
): Promise<{ url: string; own?: PrivateRedis; stop(): Promise<void> }> {
  const own = url ? undefined : await PrivateRedis.start();
  return { url: url ?? own!.url, own, stop: async () => own?.stop() };
}
