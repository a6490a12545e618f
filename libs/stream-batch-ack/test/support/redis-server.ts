import { ThrowawayRedis } from '../../../../support/throwaway-redis';

export { freePort, ping, redisServerBin } from '../../../../support/throwaway-redis';

/** A throwaway redis-server (no persistence) on a free loopback port, owned by one test file. */
export interface DedicatedRedis {
  port: number;
  url: string;
  stop(): Promise<void>;
}

export async function startRedisServer(): Promise<DedicatedRedis> {
  const server = await ThrowawayRedis.start();
  return { port: server.port, url: server.url, stop: () => server.destroy() };
}
