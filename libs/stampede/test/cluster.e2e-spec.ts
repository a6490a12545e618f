import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Cluster } from 'ioredis';
import {
  Cacheable,
  DistLock,
  RedisStore,
  SingleFlight,
  StampedeModule,
  StampedeService,
  XFetch,
} from '@nest-redis-resilience/stampede';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import { delay } from './support/redis';

const loads = new Map<string, number>();

@Injectable()
class ProductService {
  @Cacheable({ key: (id: number) => `product:${id}`, ttl: 30_000 })
  @SingleFlight()
  @XFetch()
  @DistLock({ ttl: 3000, poll: 5 })
  async find(id: number): Promise<string> {
    loads.set(`p${id}`, (loads.get(`p${id}`) ?? 0) + 1);
    await delay(50);
    return `product-${id}`;
  }

  @Cacheable({
    key: (id: number) => `offer:${id}`,
    ttl: 30_000,
    tags: (id: number) => [`shop:${id % 2}`],
  })
  @DistLock({ ttl: 3000, poll: 5 })
  async offer(id: number): Promise<string> {
    loads.set(`o${id}`, (loads.get(`o${id}`) ?? 0) + 1);
    return `offer-${id}`;
  }
}

describe('Redis Cluster client (a throwaway 3-node cluster)', () => {
  jest.setTimeout(60_000);
  let cluster: ThrowawayCluster;
  const clients: Cluster[] = [];
  const apps: TestingModule[] = [];

  beforeAll(async () => {
    cluster = await ThrowawayCluster.start();
    for (let i = 0; i < 2; i++) {
      const client = new Cluster(cluster.nodes);
      clients.push(client);
      const app = await Test.createTestingModule({
        // A generous timeout: on a loaded machine a slow answer must not bypass the lock.
        imports: [StampedeModule.forRoot({ redis: client, operationTimeout: 5000 })],
        providers: [ProductService],
      }).compile();
      apps.push(await app.init());
    }
  });

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all(clients.map((c) => c.quit()));
    await cluster?.destroy();
  });

  it('a value, its lock and its fill channel hash to one slot', async () => {
    const [valueSlot, lockSlot, channelSlot] = await Promise.all([
      clients[0].cluster('KEYSLOT', 'stampede:{product:1}'),
      clients[0].cluster('KEYSLOT', 'stampede:{product:1}:lock'),
      clients[0].cluster('KEYSLOT', 'stampede:{product:1}:fill'),
    ]);
    expect(valueSlot).toBe(lockSlot);
    expect(channelSlot).toBe(lockSlot);
  });

  it('two apps on their own Cluster clients: one load per key, keys spread over the nodes', async () => {
    const ids = Array.from({ length: 30 }, (_, i) => i);
    const results = await Promise.all(
      ids.flatMap((id) =>
        apps.flatMap((app) => Array.from({ length: 10 }, () => app.get(ProductService).find(id))),
      ),
    );
    expect(results).toHaveLength(600);
    for (const id of ids) expect(loads.get(`p${id}`)).toBe(1);
    const slots = await Promise.all(
      ids.map((id) => clients[0].cluster('KEYSLOT', `stampede:{product:${id}}`)),
    );
    expect(new Set(slots.map((s) => Math.floor(Number(s) / 5462))).size).toBeGreaterThan(1);
    const metrics = apps.map((a) => a.get(StampedeService).metrics()['ProductService.find']);
    expect(metrics.reduce((n, m) => n + m.storeErrors, 0)).toBe(0);
    // The app that lost a lock race waited for the winner's fill, woken through sharded pub/sub
    // on the key's shard (without it, a waiter sleeps until the 3 s lock would expire).
    const waits = metrics.reduce((n, m) => n + m.lockWaits, 0);
    expect(waits).toBeGreaterThan(0);
    expect(metrics.reduce((n, m) => n + m.lockWaitMs, 0) / waits).toBeLessThan(1500);
    for (const [i, app] of apps.entries()) {
      const store = app.get(StampedeService).store as RedisStore;
      expect(store.notificationsReceived).toBeLessThanOrEqual(metrics[i].lockWaits);
    }
  });

  it('invalidating a tag drops its keys on every app; tag versions live on their own slots', async () => {
    const ids = Array.from({ length: 10 }, (_, i) => i);
    const services = apps.map((app) => app.get(ProductService));
    for (const id of ids) for (const s of services) await s.offer(id);
    for (const id of ids) expect(loads.get(`o${id}`)).toBe(1);

    await apps[0].get(StampedeService).invalidateTags(['shop:1']);
    await delay(100); // the other app learns the new version from the broadcast
    for (const id of ids) for (const s of [...services].reverse()) await s.offer(id);
    for (const id of ids) expect(loads.get(`o${id}`)).toBe(id % 2 === 1 ? 2 : 1);
  });
});
