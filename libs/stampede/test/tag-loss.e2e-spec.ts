import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { createCache } from 'cache-manager';
import { Redis } from 'ioredis';
import {
  Cacheable,
  RedisStore,
  StampedeModule,
  StampedeModuleOptions,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { ThrowawayRedis } from './support/redis';
import { waitFor } from '../../../test/support/wait';

/** What the backend answers now: each invalidation below changes it first. */
let backend = 'v0';

@Injectable()
class CatalogService {
  @Cacheable({ key: () => 'catalog', ttl: 60_000, tags: ['catalog'] })
  async catalog(): Promise<string> {
    return backend;
  }
}

interface Instance {
  name: string;
  catalog: CatalogService;
  stampede: StampedeService;
}

/**
 * Tag versions are kept in Redis without expiry, but a Redis restart without persistence, a DEL
 * or an `allkeys-lru` eviction loses them; invalidations after that must still take effect.
 */
describe('tag invalidation after the tag versions are lost (a redis-server of this test)', () => {
  jest.setTimeout(90_000);
  let server: ThrowawayRedis;
  let admin: Redis;
  const apps: TestingModule[] = [];

  const start = async (name: string, options: Partial<StampedeModuleOptions>) => {
    const app = await Test.createTestingModule({
      imports: [StampedeModule.forRoot(options)],
      providers: [CatalogService],
    }).compile();
    apps.push(await app.init());
    return { name, catalog: app.get(CatalogService), stampede: app.get(StampedeService) };
  };

  /** The invalidating instance serves the new value at once, the other once the broadcast lands. */
  const invalidate = async (by: Instance, other: Instance, value: string) => {
    backend = value;
    await by.stampede.invalidateTags(['catalog']);
    expect(await by.catalog.catalog()).toBe(value);
    await waitFor(
      `${other.name} serves ${value}`,
      async () => (await other.catalog.catalog()) === value,
      10_000,
    );
    expect(await by.catalog.catalog()).toBe(value);
  };

  const invalidateThrice = async (one: Instance, two: Instance) => {
    for (let i = 0; i < 3; i++) {
      const [by, other] = i % 2 === 0 ? [one, two] : [two, one];
      await invalidate(by, other, `${backend}+`);
    }
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

  describe.each([
    ['with L1', true],
    ['without L1', false],
  ])('two instances %s', (_label, l1) => {
    const pair = async (keyPrefix: string) => {
      // A generous operation timeout: on a busy machine a slow answer must not skip an invalidation.
      const options = { redis: server.url, keyPrefix, l1, operationTimeout: 5000 };
      const one = await start('instance one', options);
      const two = await start('instance two', options);
      backend = 'v0';
      expect(await one.catalog.catalog()).toBe('v0');
      expect(await two.catalog.catalog()).toBe('v0');
      await invalidateThrice(one, two);
      return [one, two] as const;
    };

    it('a DEL of the tag key: the next invalidations reach both instances', async () => {
      const keyPrefix = `tag-del-${l1 ? 'l1' : 'no-l1'}:`;
      const [one, two] = await pair(keyPrefix);
      expect(await admin.del(`${keyPrefix}__tag:{catalog}`)).toBe(1);
      // Losing a tag key invalidates nothing by itself: both still serve a current value.
      expect(await one.catalog.catalog()).toBe(backend);
      expect(await two.catalog.catalog()).toBe(backend);
      await invalidateThrice(one, two);
    });

    it('a restart of Redis without persistence: the next invalidations reach both instances', async () => {
      const keyPrefix = `tag-restart-${l1 ? 'l1' : 'no-l1'}:`;
      const [one, two] = await pair(keyPrefix);
      await server.stop();
      await server.start();
      // Both instances reconnected and subscribed to the invalidation bus again.
      await waitFor(
        'both instances back on the restarted Redis',
        async () => {
          const stores = [one, two].map((i) => i.stampede.store as RedisStore);
          if (!stores.every((s) => s.client.status === 'ready' && s.notificationsLive()))
            return false;
          const [, subscribers] = (await admin.pubsub('NUMSUB', `${keyPrefix}__bus`)) as [
            string,
            number,
          ];
          return Number(subscribers) === 2;
        },
        30_000,
        50,
      );
      expect(await admin.exists(`${keyPrefix}__tag:{catalog}`)).toBe(0);
      expect(await one.catalog.catalog()).toBe(backend);
      expect(await two.catalog.catalog()).toBe(backend);
      await invalidateThrice(one, two);
    });
  });

  /**
   * A restart without persistence where the command connection is back before the subscriber:
   * the prefix's version (which clear() moves on) is gone from Redis while this process still
   * knows the old one.
   */
  const reconnects = async (own: ThrowawayRedis, ownAdmin: Redis, l1: boolean) => {
    const keyPrefix = 'tag-reconnect:';
    const { stampede } = await start('instance', { redis: own.url, keyPrefix, l1 });
    const store = stampede.store as RedisStore;
    const loads = new Map<string, number>();
    const load = (key: string) =>
      stampede.getOrLoad(
        key,
        async () => {
          loads.set(key, (loads.get(key) ?? 0) + 1);
          return key;
        },
        { ttl: 60_000 },
      );
    const connectionId = async (of: 'command' | 'subscriber') => {
      const id = of === 'command' ? String(await store.client.client('ID')) : undefined;
      const line = ((await ownAdmin.client('LIST')) as string)
        .split('\n')
        .find((l) => (id ? l.startsWith(`id=${id} `) : / sub=1 /.test(l)));
      return /^id=(\d+)/.exec(line ?? '')?.[1];
    };
    await load('before');
    const subscriberId = await connectionId('subscriber');
    expect(subscriberId).toBeDefined();

    await ownAdmin.del(`${keyPrefix}__tag:{}`, `${keyPrefix}{before}`);
    await ownAdmin.client('KILL', 'ID', (await connectionId('command'))!);
    await waitFor(
      'the command connection is back',
      async () => (await store.client.ping().catch(() => '')) === 'PONG',
      10_000,
    );
    expect(await load('after')).toBe('after');
    expect(loads.get('after')).toBe(1);

    // The subscriber comes back later: this process reads the versions again.
    await ownAdmin.client('KILL', 'ID', subscriberId!);
    await waitFor(
      'the subscriber is back',
      async () => {
        const id = await connectionId('subscriber'); // subscribed again
        return id !== undefined && id !== subscriberId && store.notificationsLive();
      },
      10_000,
    );
    expect(await load('after')).toBe('after');
    expect(loads.get('after')).toBe(1);
  };

  it.each([
    ['with L1', true],
    ['without L1', false],
  ])(
    'a value loaded after Redis lost its data, before the subscriber is back, stays a hit once it is (%s)',
    async (_label, l1) => {
      // A server of its own: the only subscriber on it is this instance's.
      const own = await ThrowawayRedis.start();
      const ownAdmin = new Redis(own.url);
      try {
        await reconnects(own, ownAdmin, l1);
      } finally {
        await apps.pop()?.close();
        await ownAdmin.quit();
        await own.destroy();
      }
    },
  );

  it('the Redis store: new versions above the current one, the floor and the server clock; a missing or corrupt one is set', async () => {
    const store = new RedisStore(server.url, { keyPrefix: 'tag-store:', operationTimeout: 5000 });
    try {
      expect(await store.waitUntilReady(10_000)).toBe(true);
      const key = 'tag-store:__tag:{t}';
      const [seconds, micros] = await admin.time();
      const serverNow = Number(seconds) * 1_000_000 + Number(micros);
      const [seeded] = await store.tagVersions(['t'], [1]);
      expect(seeded).toBeGreaterThanOrEqual(serverNow);
      expect(await admin.get(key)).toBe(String(seeded));
      expect(await store.tagVersions(['t'], [1])).toEqual([seeded]); // read, not set again

      const [bumped] = await store.bumpTags(['t'], [1]);
      expect(bumped).toBeGreaterThan(seeded);
      // A floor above the server's clock (a caller that saw versions of a clock now gone back).
      const floor = bumped + 3_600_000_000;
      expect(await store.bumpTags(['t'], [floor])).toEqual([floor]);
      expect(await store.bumpTags(['t'], [1])).toEqual([floor + 1]);
      expect(await admin.get(key)).toBe(String(floor + 1));

      await admin.set(key, 'not a version');
      const [reset] = await store.tagVersions(['t'], [1]);
      expect(reset).toBeGreaterThanOrEqual(serverNow);
      expect(await admin.get(key)).toBe(String(reset));
    } finally {
      await store.close();
    }
  });

  it('an instance started after the tag key was lost does not serve a value stamped before the last invalidation', async () => {
    const keyPrefix = 'tag-late:';
    const options = { redis: server.url, keyPrefix, l1: true };
    const one = await start('instance one', options);
    backend = 'old';
    expect(await one.catalog.catalog()).toBe('old');
    backend = 'new';
    // Values are dropped lazily, when read: the old one stays in Redis, stamped with the old version.
    await one.stampede.invalidateTags(['catalog']);
    expect(await admin.exists(`${keyPrefix}{catalog}`)).toBe(1);
    expect(await admin.del(`${keyPrefix}__tag:{catalog}`)).toBe(1);

    const late = await start('an instance started later', options);
    expect(await late.catalog.catalog()).toBe('new');
    expect(await one.catalog.catalog()).toBe('new');
  });

  it('cache-manager: an app restarted on a cache that outlived it, invalidating before any read', async () => {
    // A cache-manager cache keeps its values across app restarts (Redis- or disk-backed Keyv);
    // the tag versions of the app before the restart are gone with it.
    const cache = createCache();
    const before = await start('the app before its restart', { cacheManager: cache, l1: false });
    backend = 'v0';
    expect(await before.catalog.catalog()).toBe('v0');
    for (let i = 1; i <= 3; i++) {
      backend = `v${i}`;
      await before.stampede.invalidateTags(['catalog']);
      expect(await before.catalog.catalog()).toBe(backend);
    }
    await apps.pop()!.close();

    const after = await start('the app after its restart', { cacheManager: cache, l1: false });
    for (let i = 4; i <= 6; i++) {
      backend = `v${i}`;
      await after.stampede.invalidateTags(['catalog']);
      expect(await after.catalog.catalog()).toBe(backend);
    }
  });
});
