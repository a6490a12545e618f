import { Redis } from 'ioredis';
import { Instance } from './support/instances';
import { REDIS_URL, delay, deleteKeys, uniquePrefix } from './support/redis';

/** Separate OS processes, each a Nest app context with its own Redis connections. */
describe('cross-instance (forked processes, real Redis)', () => {
  jest.setTimeout(60_000);
  const prefix = uniquePrefix('cross');
  const LOCK_TTL = 1500;
  let redis: Redis;
  let instances: Instance[] = [];

  const loads = async (key: string) => Number((await redis.get(`${prefix}loads:${key}`)) ?? 0);

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    const env = { REDIS_URL, STAMPEDE_PREFIX: prefix, LOCK_TTL: String(LOCK_TTL) };
    instances = await Promise.all([1, 2, 3, 4].map(() => Instance.start(env)));
  });

  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop()));
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('with @DistLock: exactly one loader call per round across 4 processes', async () => {
    for (let round = 0; round < 5; round++) {
      const key = `round-${round}`;
      const results = await Promise.all(instances.map((i) => i.call('locked', key, 50, 100)));
      expect(await loads(`locked:${key}`)).toBe(1);
      const values = results.flatMap((r) => r.values ?? []);
      expect(values).toHaveLength(200);
      expect(new Set(values).size).toBe(1); // every caller in every process got the one loaded value
    }
  });

  it('without @DistLock: one loader call per process per round', async () => {
    for (let round = 0; round < 3; round++) {
      const key = `round-${round}`;
      const results = await Promise.all(instances.map((i) => i.call('unlocked', key, 50, 100)));
      expect(await loads(`unlocked:${key}`)).toBe(instances.length);
      expect(results.every((r) => r.values?.length === 50)).toBe(true);
    }
  });

  it('a lock holder killed with SIGKILL mid-load: another process takes over within the lock TTL and loads once', async () => {
    const key = 'killed-holder';
    const [victim, ...others] = instances;
    // The victim's loader would run 30 s; it takes the lock, then dies.
    void victim.call('locked', key, 1, 30_000);
    // A miss's lock is a mark in the value key.
    const locked = async () =>
      (await redis.get(`${prefix}{locked:${key}}`))?.startsWith('\u0000lock:') === true;
    for (let i = 0; i < 200 && !(await locked()); i++) await delay(10);
    expect(await locked()).toBe(true);
    const waiting = Promise.all(others.map((o) => o.call('locked', key, 20, 50)));
    await delay(100);
    const killedAt = Date.now();
    await victim.kill();
    const results = await waiting;
    const tookOver = Date.now() - killedAt;

    expect(tookOver).toBeLessThan(LOCK_TTL + 1000);
    const values = results.flatMap((r) => r.values ?? []);
    expect(values).toHaveLength(others.length * 20);
    expect(new Set(values).size).toBe(1);
    expect(values[0]).not.toContain(`by-${victim.child.pid}`);
    // one load by the victim (never finished) + exactly one takeover load
    expect(await loads(`locked:${key}`)).toBe(2);
    instances = others;
  });
});
