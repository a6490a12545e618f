import { Test, TestingModule } from '@nestjs/testing';
import { Cluster, Redis } from 'ioredis';
import { StampedeModule, StampedeService } from '@nest-redis-resilience/stampede';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import { delay } from './support/redis';

const LOCKED = { ttl: 60_000, lock: { ttl: 10_000 } };

/** MGET calls on every node since the last CONFIG RESETSTAT. */
async function mgets(nodes: Redis[]): Promise<number> {
  let total = 0;
  for (const node of nodes) {
    const match = /cmdstat_mget:calls=(\d+)/.exec(await node.info('commandstats'));
    total += match ? Number(match[1]) : 0;
  }
  return total;
}

describe('getOrLoadMany on a Redis Cluster (a throwaway 3-node cluster)', () => {
  jest.setTimeout(60_000);
  let cluster: ThrowawayCluster;
  const clients: Cluster[] = [];
  const apps: TestingModule[] = [];
  let nodes: Redis[] = [];

  beforeAll(async () => {
    cluster = await ThrowawayCluster.start();
    nodes = cluster.nodes.map((n) => new Redis(n.port, n.host));
    for (let i = 0; i < 2; i++) {
      const client = new Cluster(cluster.nodes);
      clients.push(client);
      const app = await Test.createTestingModule({
        imports: [
          StampedeModule.forRoot({ redis: client, keyPrefix: 'many:', operationTimeout: 5000 }),
        ],
      }).compile();
      apps.push(await app.init());
    }
  });

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all(clients.map((c) => c.quit()));
    await Promise.all(nodes.map((n) => n.quit()));
    await cluster?.destroy();
  });

  it('100 keys over many slots, 50 cached, on two apps at once: one MGET per slot each, each missing key loaded once', async () => {
    const services = apps.map((app) => app.get(StampedeService));
    const keys = Array.from({ length: 100 }, (_, i) => `item:${i}`);
    const cached = keys.filter((_, i) => i % 2 === 0);
    await services[0].getOrLoadMany(
      cached,
      (ks) => Object.fromEntries(ks.map((k) => [k, k])),
      LOCKED,
    );
    const slots = new Set(
      await Promise.all(keys.map((k) => clients[0].cluster('KEYSLOT', `many:{${k}}`))),
    );
    expect(slots.size).toBeGreaterThan(50);
    await Promise.all(nodes.map((n) => n.config('RESETSTAT')));

    const calls: string[][] = [];
    const load = async (ks: string[]) => {
      calls.push(ks);
      await delay(50);
      return Object.fromEntries(ks.map((k) => [k, k]));
    };
    const results = await Promise.all(services.map((s) => s.getOrLoadMany(keys, load, LOCKED)));
    for (const values of results) expect(values).toEqual(keys);
    expect(calls.length).toBeLessThanOrEqual(2);
    expect(calls.flat().sort()).toEqual(keys.filter((_, i) => i % 2 === 1).sort());
    expect(await mgets(nodes)).toBe(2 * slots.size);
    for (const s of services) expect(s.metrics().getOrLoadMany.storeErrors).toBe(0);
  });
});
