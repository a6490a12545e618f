import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  SingleFlight,
  StampedeModule,
  StampedeModuleOptions,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { ThrowawayRedis } from './support/redis';
import { waitFor } from '../../../test/support/wait';

/** Loads across every instance of this file: a value's `load` says which load made it. */
let loadsEverywhere = 0;

@Injectable()
class ProfileService {
  loads = 0;

  @Cacheable({
    key: (id: string) => `profile:${id}`,
    ttl: 60_000,
    tags: (id: string) => [`user:${id}`, 'profiles'],
  })
  @SingleFlight()
  @DistLock({ ttl: 5000, poll: 5 })
  async profile(id: string): Promise<{ id: string; load: number; seen: Date }> {
    this.loads++;
    return { id, load: ++loadsEverywhere, seen: new Date(Date.UTC(2026, 0, 1)) };
  }

  @Cacheable({ key: (id: string) => `plain:${id}`, ttl: 60_000, l1: false })
  async plain(id: string): Promise<string> {
    this.loads++;
    return id;
  }
}

/** Keeps Date values as Dates: `{ $date: iso }` in the text. */
const dateSerializer = {
  serialize: (value: unknown) =>
    JSON.stringify(value, function (this: Record<string, unknown>, key, v: unknown) {
      const raw = this[key];
      return raw instanceof Date ? { $date: raw.toISOString() } : v;
    }),
  deserialize: (text: string) =>
    JSON.parse(text, (_key, v: unknown) =>
      v && typeof v === 'object' && '$date' in v ? new Date((v as { $date: string }).$date) : v,
    ) as unknown,
};

async function commandCalls(admin: Redis): Promise<number> {
  let total = 0;
  for (const line of (await admin.info('commandstats')).split('\r\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (match && !/^(info|config|client)/.test(match[1])) total += Number(match[2]);
  }
  return total;
}

/** The in-process tier and tags, several app instances on a redis-server of this test. */
describe('L1 tier and tags (a redis-server of this test)', () => {
  jest.setTimeout(60_000);
  let server: ThrowawayRedis;
  let admin: Redis;
  const apps: TestingModule[] = [];

  const start = async (options: Partial<StampedeModuleOptions> = {}) => {
    const app = await Test.createTestingModule({
      imports: [
        StampedeModule.forRoot({
          redis: server.url,
          keyPrefix: 'tiers:',
          l1: true,
          serializer: dateSerializer,
          ...options,
        }),
      ],
      providers: [ProfileService],
    }).compile();
    apps.push(await app.init());
    return { app, profiles: app.get(ProfileService), stampede: app.get(StampedeService) };
  };

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    admin = new Redis(server.url);
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await admin?.quit();
    await server?.destroy();
  });

  it('a hit from L1 makes no Redis command; a method with l1: false reads Redis', async () => {
    const { profiles, stampede } = await start();
    const first = await profiles.profile('a');
    expect(first.seen).toBeInstanceOf(Date); // the serializer round-trips Dates
    await admin.config('RESETSTAT');
    for (let i = 0; i < 100; i++) expect(await profiles.profile('a')).toEqual(first);
    expect(await commandCalls(admin)).toBe(0);
    expect(stampede.metrics()['ProfileService.profile']).toMatchObject({ l1Hits: 100, loads: 1 });

    await profiles.plain('a');
    await admin.config('RESETSTAT');
    for (let i = 0; i < 10; i++) await profiles.plain('a');
    expect(await commandCalls(admin)).toBe(10);
  });

  it('L1 hits decode a copy each by default; with l1.shared they return one frozen copy', async () => {
    const copies = await start({ keyPrefix: 'tiers-copies:' });
    const first = await copies.profiles.profile('c');
    const [hit1, hit2] = [await copies.profiles.profile('c'), await copies.profiles.profile('c')];
    expect(hit1).toEqual(first);
    expect(hit1).not.toBe(hit2);
    hit1.load = -1; // a caller's change reaches nobody else
    expect((await copies.profiles.profile('c')).load).toBe(first.load);

    const shared = await start({ keyPrefix: 'tiers-shared:', l1: { shared: true } });
    const loaded = await shared.profiles.profile('c');
    const [one, two] = [await shared.profiles.profile('c'), await shared.profiles.profile('c')];
    expect(one).toBe(two);
    expect(one).toEqual(loaded);
    expect(one.seen).toBeInstanceOf(Date); // decoded by the module's serializer, once
    expect(Object.isFrozen(one)).toBe(true);
    expect(() => {
      one.load = -1;
    }).toThrow(TypeError);
    expect(shared.stampede.metrics()['ProfileService.profile']).toMatchObject({
      l1Hits: 2,
      loads: 1,
    });
  });

  it('an invalidate on one instance reaches the L1 of the others', async () => {
    const trio = await Promise.all([1, 2, 3].map(() => start({ keyPrefix: 'tiers-inv:' })));
    const loadsOf = () => trio.reduce((n, t) => n + t.profiles.loads, 0);
    await Promise.all(trio.map((t) => t.profiles.profile('b')));
    expect(loadsOf()).toBe(1);
    await Promise.all(trio.map((t) => t.profiles.profile('b'))); // L1 hits everywhere
    expect(trio.every((t) => t.stampede.metrics()['ProfileService.profile'].l1Hits >= 1)).toBe(
      true,
    );

    const old = (await trio[2].profiles.profile('b')).load;
    await trio[0].stampede.invalidate('profile:b');
    const invalidatedAt = Date.now();
    // The others drop their L1 copy when the broadcast arrives: their next call reloads.
    await waitFor(
      'instance 3 serves a new value',
      async () => (await trio[2].profiles.profile('b')).load !== old,
      2000,
      2,
    );
    expect(Date.now() - invalidatedAt).toBeLessThan(500);
    const values = await Promise.all(trio.map((t) => t.profiles.profile('b')));
    expect(new Set(values.map((v) => v.load)).size).toBe(1); // every instance serves the new value
    expect(loadsOf()).toBe(2);
  });

  it('a reconnect of the subscriber clears L1 (invalidations may have been missed)', async () => {
    const { profiles, stampede } = await start({ keyPrefix: 'tiers-reconnect:' });
    await profiles.profile('c');
    expect(stampede.l1Stats()?.entries).toBe(1);
    await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await waitFor(
      'L1 cleared after the reconnect',
      () => stampede.l1Stats()?.entries === 0,
      10_000,
    );
    expect(await profiles.profile('c')).toMatchObject({ id: 'c' }); // read again from Redis
  });

  it('invalidating a tag drops all its keys on every instance, in Redis and in L1', async () => {
    const [one, two] = await Promise.all([1, 2].map(() => start({ keyPrefix: 'tiers-tags:' })));
    for (const id of ['u1', 'u2']) {
      await one.profiles.profile(id);
      await two.profiles.profile(id);
    }
    expect(one.profiles.loads + two.profiles.loads).toBe(2);

    await one.stampede.invalidateTags(['user:u1']);
    // Instance 2 learns the new version from the broadcast; its next call reloads u1.
    await waitFor(
      'instance 2 reloads u1',
      async () => {
        await two.profiles.profile('u1');
        return one.profiles.loads + two.profiles.loads === 3;
      },
      2000,
      5,
    );
    expect(one.profiles.loads + two.profiles.loads).toBe(3); // u1 loaded again, once
    await one.profiles.profile('u1');
    await one.profiles.profile('u2');
    await two.profiles.profile('u2');
    expect(one.profiles.loads + two.profiles.loads).toBe(3); // u2 untouched

    // A tag shared by both keys: both reload, once each across the two instances.
    await two.stampede.invalidateTags(['profiles']);
    await new Promise((r) => setTimeout(r, 100));
    for (const id of ['u1', 'u2']) {
      await one.profiles.profile(id);
      await two.profiles.profile(id);
    }
    expect(one.profiles.loads + two.profiles.loads).toBe(5);
  });

  it('an instance started after a tag invalidation reads the tag version, not a stale value', async () => {
    const first = await start({ keyPrefix: 'tiers-late:' });
    await first.profiles.profile('late');
    await first.stampede.invalidateTags(['user:late']);
    const late = await start({ keyPrefix: 'tiers-late:' });
    await late.profiles.profile('late');
    expect(first.profiles.loads + late.profiles.loads).toBe(2);
    await first.profiles.profile('late');
    expect(first.profiles.loads + late.profiles.loads).toBe(2);
  });
});
