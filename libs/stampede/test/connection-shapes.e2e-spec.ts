import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Cluster, Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  RedisStore,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import { REDIS_URL } from '../../../test/support/redis';
import { delay } from './support/redis';

const loads = new Map<number, number>();

@Injectable()
class PriceService {
  @Cacheable({ key: (id: number) => `price:${id}`, ttl: 30_000 })
  @DistLock({ ttl: 3000, poll: 5 })
  async find(id: number): Promise<string> {
    loads.set(id, (loads.get(id) ?? 0) + 1);
    await delay(50);
    return `price-${id}`;
  }
}

describe('redis: { cluster: nodes } (a throwaway 3-node cluster)', () => {
  jest.setTimeout(60_000);
  let cluster: ThrowawayCluster;
  let probe: Cluster;
  const apps: TestingModule[] = [];

  beforeAll(async () => {
    cluster = await ThrowawayCluster.start();
    probe = new Cluster(cluster.nodes);
    for (let i = 0; i < 2; i++) {
      const app = await Test.createTestingModule({
        imports: [
          StampedeModule.forRoot({
            redis: { cluster: cluster.nodes },
            keyPrefix: 'shapes:',
            operationTimeout: 5000,
          }),
        ],
        providers: [PriceService],
      }).compile();
      apps.push(await app.init());
    }
  });

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await probe?.quit();
    await cluster?.destroy();
  });

  it('makes a Cluster client: one load per key across two apps, the values on the cluster', async () => {
    const stores = apps.map((a) => a.get(StampedeService).store as RedisStore);
    for (const store of stores) expect(store.client).toBeInstanceOf(Cluster);
    const ids = [1, 2, 3, 4, 5];
    const results = await Promise.all(
      ids.flatMap((id) =>
        apps.flatMap((app) => Array.from({ length: 5 }, () => app.get(PriceService).find(id))),
      ),
    );
    expect(new Set(results)).toEqual(new Set(ids.map((id) => `price-${id}`)));
    for (const id of ids) expect(loads.get(id)).toBe(1);
    expect(await probe.exists('shapes:{price:1}')).toBe(1);
  });

  it('closes the client it made when the app closes', async () => {
    const app = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({ redis: { cluster: cluster.nodes }, keyPrefix: 'x:' })],
    }).compile();
    await app.init();
    const store = app.get(StampedeService).store as RedisStore;
    expect(await store.waitUntilReady(5000)).toBe(true);
    await app.close();
    // A Cluster reports 'end' once every node connection has closed, shortly after quit().
    expect(['disconnecting', 'end']).toContain(store.client.status);
    if (store.client.status !== 'end') await new Promise((r) => store.client.once('end', r));
  });
});

describe('redis: a client the app made', () => {
  it('is used as it is and left open when the app closes', async () => {
    const client = new Redis(REDIS_URL);
    try {
      const app = await Test.createTestingModule({
        imports: [StampedeModule.forRoot({ redis: client, keyPrefix: `given:${process.pid}:` })],
      }).compile();
      await app.init();
      const store = app.get(StampedeService).store as RedisStore;
      expect(store.client).toBe(client);
      const value = await app.get(StampedeService).getOrLoad('k', async () => 'v', { ttl: 10_000 });
      expect(value).toBe('v');
      await app.close();
      expect(client.status).toBe('ready');
      expect(await client.get(`given:${process.pid}:{k}`)).not.toBeNull();
      await client.del(`given:${process.pid}:{k}`);
    } finally {
      client.disconnect();
    }
  });
});
