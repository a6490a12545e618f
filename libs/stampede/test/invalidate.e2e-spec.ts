import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Cluster, Redis } from 'ioredis';
import {
  Cacheable,
  RedisStore,
  StampedeError,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import { ThrowawayRedis } from './support/redis';
import { waitFor } from '../../../test/support/wait';

const PREFIX = 'inv:';
let loadsEverywhere = 0;

@Injectable()
class ProfileService {
  @Cacheable({ key: (id: string) => `profile:${id}`, ttl: 60_000 })
  async profile(id: string): Promise<{ id: string; load: number }> {
    return { id, load: ++loadsEverywhere };
  }

  @Cacheable({
    key: (id: string) => `tagged:${id}`,
    ttl: 60_000,
    tags: (id: string) => [`group:${id}`],
  })
  async tagged(id: string): Promise<{ id: string; load: number }> {
    return { id, load: ++loadsEverywhere };
  }
}

/**
 * An invalidate() that Redis carries out after the caller gave up (a `CLIENT PAUSE`) must still
 * reach every instance: the delete and the broadcast are one step. A caller whose invalidate()
 * rejects is told whether it may still happen.
 */
describe('invalidate() during a Redis stall (a redis-server of this test)', () => {
  jest.setTimeout(60_000);
  let server: ThrowawayRedis;
  let admin: Redis;
  const apps: TestingModule[] = [];

  const start = async () => {
    const app = await Test.createTestingModule({
      imports: [
        StampedeModule.forRoot({
          redis: server.url,
          keyPrefix: PREFIX,
          l1: true,
          operationTimeout: 300,
          cooldown: 0, // reads go on to Redis at once after the timeout
        }),
      ],
      providers: [ProfileService],
    }).compile();
    apps.push(await app.init());
    return { profiles: app.get(ProfileService), stampede: app.get(StampedeService) };
  };
  const stores = () => apps.map((app) => app.get(StampedeService).store as RedisStore);

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    admin = new Redis(server.url);
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await admin?.quit();
    await server?.destroy();
  });

  it('an invalidate() that times out still reaches every instance when Redis carries it out', async () => {
    const a = await start();
    const b = await start();
    const old = await a.profiles.profile('p');
    expect(await b.profiles.profile('p')).toEqual(old); // both hold it in L1

    await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
    const error = (await a.stampede.invalidate('profile:p').then(
      () => undefined,
      (err: unknown) => err,
    )) as StampedeError & { pending?: boolean };
    expect(error).toBeInstanceOf(StampedeError);
    expect(error).toMatchObject({ code: 'STAMPEDE_INVALIDATION', pending: true });
    expect(error.message).toContain('profile:p');
    expect(error.message).toContain('may still happen');
    // Asked meanwhile, A cannot read Redis (its connection waits behind the paused command): it
    // loads without Redis and keeps that value in L1.
    await a.profiles.profile('p');

    // The pause ends; the delete runs, and with it the broadcast.
    await waitFor(
      'the delete ran',
      async () => (await admin.exists(`${PREFIX}{profile:p}`)) === 0,
      10_000,
    );
    // B is told, and so is A (its own late invalidation drops what it loaded meanwhile): both
    // read Redis again and agree on a new value.
    await waitFor(
      'A and B serve the same new value',
      async () => {
        const [va, vb] = [await a.profiles.profile('p'), await b.profiles.profile('p')];
        return va.load === vb.load && va.load !== old.load;
      },
      5_000,
    );
  });

  it('an invalidateTags() that times out still reaches every instance when Redis carries it out', async () => {
    const a = await start();
    const b = await start();
    const old = await a.profiles.tagged('t');
    expect(await b.profiles.tagged('t')).toEqual(old); // both hold it in L1
    const tagKey = `${PREFIX}__tag:{group:t}`;
    const before = Number(await admin.get(tagKey));

    await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
    const error = (await a.stampede.invalidateTags(['group:t']).then(
      () => undefined,
      (err: unknown) => err,
    )) as StampedeError & { pending?: boolean };
    expect(error).toBeInstanceOf(StampedeError);
    expect(error).toMatchObject({
      code: 'STAMPEDE_INVALIDATION',
      pending: true,
      tags: ['group:t'],
    });
    expect(error.message).toContain('"group:t"');
    expect(error.message).toContain('may still be set');

    // The pause ends; the new version is set, and broadcast in the same step: B drops its copy,
    // and so does A (its own late invalidation is applied here too).
    await waitFor(
      'the new version is set',
      async () => Number(await admin.get(tagKey)) > before,
      10_000,
    );
    await waitFor(
      'A and B serve the same new value',
      async () => {
        const [va, vb] = [await a.profiles.tagged('t'), await b.profiles.tagged('t')];
        return va.load === vb.load && va.load !== old.load;
      },
      5_000,
    );
  });

  it('an invalidate() while Redis is unreachable says that nothing was done', async () => {
    const a = await start();
    await a.profiles.profile('q');
    await server.stop();
    await waitFor(
      'the store sees the connection gone',
      () => (a.stampede.store as RedisStore).client.status !== 'ready',
      10_000,
    );
    await expect(a.stampede.invalidate('profile:q')).rejects.toMatchObject({
      code: 'STAMPEDE_INVALIDATION',
      pending: false,
      message: expect.stringContaining('nothing was deleted'),
    });
    await expect(a.stampede.invalidateTags(['group:q', 'group:r'])).rejects.toMatchObject({
      code: 'STAMPEDE_INVALIDATION',
      pending: false,
      tags: ['group:q', 'group:r'],
      message: expect.stringContaining('no new version was set'),
    });
    await server.start();
    // Closed once reconnected: a subscriber closed while it resubscribes leaves a rejection.
    await waitFor(
      'every store reconnected',
      () => stores().every((store) => store.invalidationsDownSince() === undefined),
      15_000,
    );
    await admin.ping(); // so is this one (quit() would wait for its socket otherwise)
  });
});

/** The delete and its broadcast are one script on a Cluster too (the key's node publishes). */
describe('invalidate() on a Redis Cluster (a throwaway 3-node cluster)', () => {
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
        imports: [StampedeModule.forRoot({ redis: client, keyPrefix: PREFIX, l1: true })],
        providers: [ProfileService],
      }).compile();
      apps.push(await app.init());
    }
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await Promise.all(clients.map((client) => client.quit()));
    await cluster?.destroy();
  });

  it('reaches the L1 of the other instance', async () => {
    const [a, b] = apps.map((app) => app.get(ProfileService));
    const ids = ['c1', 'c2', 'c3', 'c4', 'c5', 'c6']; // on more than one node
    const old = await Promise.all(ids.map((id) => a.profile(id)));
    for (const id of ids) await b.profile(id); // both hold them in L1
    for (const id of ids) await apps[0].get(StampedeService).invalidate(`profile:${id}`);
    await waitFor(
      'B serves new values',
      async () => {
        const now = await Promise.all(ids.map((id) => b.profile(id)));
        return now.every((value, i) => value.load !== old[i].load);
      },
      5_000,
    );
  });

  it('invalidateTags() reaches the L1 of the other instance (each tag node publishes)', async () => {
    const [a, b] = apps.map((app) => app.get(ProfileService));
    const ids = ['g1', 'g2', 'g3', 'g4', 'g5', 'g6']; // tags on more than one node
    const old = await Promise.all(ids.map((id) => a.tagged(id)));
    for (const id of ids) await b.tagged(id); // both hold them in L1
    await apps[0].get(StampedeService).invalidateTags(ids.map((id) => `group:${id}`));
    await waitFor(
      'B serves new values',
      async () => {
        const now = await Promise.all(ids.map((id) => b.tagged(id)));
        return now.every((value, i) => value.load !== old[i].load);
      },
      5_000,
    );
  });
});
