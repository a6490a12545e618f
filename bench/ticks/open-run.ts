/* What a bench:ticks run (consumer rows, --rebalance) opens first: its Redis and what it runs on. */
import { Redis, RedisOptions } from 'ioredis';
import { collectEnvInfo, formatEnvInfo, gitRevision } from '../shared/env-info';
import { redisFor } from '../shared/private-redis';

/** `url`, or a throwaway redis-server; a connection to it; the machine and package versions. */
export async function openRun(url: string | undefined, packages: string[], options?: RedisOptions) {
  const target = await redisFor(url);
  const redis = new Redis(target.url, options ?? {});
  const close = async () => {
    await redis.quit();
    await target.stop();
  };
  const env = await collectEnvInfo(redis, target.url, packages).catch(async (err: unknown) => {
    await close();
    throw err;
  });
  return {
    ...{ redis, redisUrl: target.url, own: !!target.own, env, envText: formatEnvInfo(env) },
    ...{ revision: gitRevision, out: (line: string) => process.stdout.write(`${line}\n`), close },
  };
}
