import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Cluster } from 'ioredis';
import {
  Cacheable,
  currentLoadContext,
  DistLock,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import { waitFor } from '../../../test/support/wait';

const loads = new Map<string, number>();
let held: Promise<void> = Promise.resolve();

@Injectable()
class OfferService {
  @Cacheable({
    key: (id: number) => `offer:${id}`,
    ttl: 60_000,
    grace: 60_000,
    tags: () => ['catalog'],
  })
  @DistLock({ ttl: 5000 })
  async offer(id: number): Promise<string> {
    const n = (loads.get(`offer:${id}`) ?? 0) + 1;
    loads.set(`offer:${id}`, n);
    await held;
    const context = currentLoadContext();
    if (context && id % 2 === 0) context.ttl = 2000; // adaptive: even offers are short-lived
    return `offer-${id}#${n}`;
  }
}

/** set/get, clear, soft expiry and loader-set TTLs where the keys span the Cluster's slots. */
describe('get, set, clear, soft expiry and adaptive TTL on a Redis Cluster (a throwaway 3-node cluster)', () => {
  jest.setTimeout(90_000);
  let cluster: ThrowawayCluster;
  const clients: Cluster[] = [];
  const apps: TestingModule[] = [];
  const ids = Array.from({ length: 20 }, (_, i) => i);
  const stampede = (i: number) => apps[i].get(StampedeService);
  const offers = (i: number) => apps[i].get(OfferService);
  const slotsOf = (keys: string[]) =>
    Promise.all(keys.map((k) => clients[0].cluster('KEYSLOT', `stampede:{${k}}`)));
  const spread = (slots: unknown[]) =>
    new Set(slots.map((s) => Math.floor(Number(s) / 5462))).size > 1;

  beforeAll(async () => {
    cluster = await ThrowawayCluster.start();
    for (let i = 0; i < 2; i++) {
      const client = new Cluster(cluster.nodes);
      clients.push(client);
      const app = await Test.createTestingModule({
        imports: [StampedeModule.forRoot({ redis: client, l1: true, operationTimeout: 5000 })],
        providers: [OfferService],
      }).compile();
      apps.push(await app.init());
    }
  });

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all(clients.map((c) => c.quit()));
    await cluster?.destroy();
  });

  it('values set on one app are read on the other, over keys on several nodes', async () => {
    const keys = ids.map((id) => `item:${id}`);
    expect(spread(await slotsOf(keys))).toBe(true);
    await Promise.all(keys.map((k, i) => stampede(0).set(k, { i }, { tags: ['items'] })));
    expect(await Promise.all(keys.map((k) => stampede(1).get(k)))).toEqual(ids.map((i) => ({ i })));
    await stampede(1).set('item:0', { i: -1 });
    expect(await stampede(1).get('item:0')).toEqual({ i: -1 });
    await waitFor('app 0 reads the new value', async () => {
      const value = await stampede(0).get<{ i: number }>('item:0');
      return value?.i === -1;
    });
    await stampede(0).delete('item:1');
    await waitFor('app 1 drops it', async () => (await stampede(1).get('item:1')) === undefined);
  });

  it('the loader sets the TTL of the values it returns', async () => {
    expect(await offers(0).offer(100)).toBe('offer-100#1');
    expect(await offers(0).offer(101)).toBe('offer-101#1');
    const [even, odd] = await Promise.all([
      clients[0].pttl('stampede:{offer:100}'),
      clients[0].pttl('stampede:{offer:101}'),
    ]);
    expect(even).toBeGreaterThan(0);
    expect(even).toBeLessThanOrEqual(2000 + 60_000); // ttl from the loader + grace
    expect(odd).toBeGreaterThan(60_000 + 2000);
  });

  it('a soft invalidation of a tag whose keys span the slots: stale at once, one refresh per key', async () => {
    for (const id of ids) for (const i of [0, 1]) await offers(i).offer(id);
    expect(spread(await slotsOf(ids.map((id) => `offer:${id}`)))).toBe(true);
    let release!: () => void;
    held = new Promise((resolve) => (release = resolve));
    try {
      await stampede(1).invalidateTags(['catalog'], { mode: 'soft' });
      await waitFor('both apps serve stale while every key refreshes', async () => {
        const served = await Promise.all(
          ids.flatMap((id) => [0, 1].map((i) => offers(i).offer(id))),
        );
        return (
          served.every((v) => v.endsWith('#1')) && ids.every((id) => loads.get(`offer:${id}`) === 2)
        );
      });
    } finally {
      release();
      held = Promise.resolve();
    }
    await waitFor('refreshed everywhere', async () =>
      (await Promise.all(ids.flatMap((id) => [0, 1].map((i) => offers(i).offer(id))))).every((v) =>
        v.endsWith('#2'),
      ),
    );
    for (const id of ids) expect(loads.get(`offer:${id}`)).toBe(2);
  });

  it('expire on keys of several nodes keeps them stale for one refresh', async () => {
    await Promise.all(ids.map((id) => stampede(0).expire(`offer:${id}`)));
    await waitFor('refreshed after expiry', async () =>
      (await Promise.all(ids.flatMap((id) => [0, 1].map((i) => offers(i).offer(id))))).every((v) =>
        v.endsWith('#3'),
      ),
    );
    for (const id of ids) expect(loads.get(`offer:${id}`)).toBe(3);
  });

  it('clear drops every value on both apps', async () => {
    await stampede(0).clear();
    expect(await stampede(0).get('item:2')).toBeUndefined();
    await waitFor(
      'app 1 learns the clear',
      async () => (await stampede(1).get('item:2')) === undefined,
    );
    const served = await Promise.all(ids.flatMap((id) => [1, 0].map((i) => offers(i).offer(id))));
    expect(served.every((v) => v.endsWith('#4'))).toBe(true);
    for (const id of ids) expect(loads.get(`offer:${id}`)).toBe(4);
  });
});
