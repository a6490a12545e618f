import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  StampedeEventMap,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import {
  StampedeHealthIndicator,
  StampedeHealthModule,
} from '@nest-redis-resilience/stampede/health';
import { ThrowawayRedis } from './support/redis';
import { waitFor } from '../../../test/support/wait';

const MAX_STALE_MS = 1000;
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
    tags: (id: string) => [`t:${id}`],
  })
  async tagged(id: string): Promise<{ id: string; load: number }> {
    return { id, load: ++loadsEverywhere };
  }
}

/**
 * An instance whose subscriber cannot reconnect (Redis at `maxclients`) misses every
 * invalidation. It must not serve its L1 copies for longer than `l1.maxStaleMs` meanwhile.
 */
describe('L1 while the invalidation bus is down (a redis-server of this test)', () => {
  jest.setTimeout(60_000);
  let server: ThrowawayRedis;
  let admin: Redis;
  const apps: TestingModule[] = [];

  const start = async (name: string, l1 = true) => {
    const app = await Test.createTestingModule({
      imports: [
        StampedeModule.forRoot({
          // The name tells this instance's connections apart in CLIENT LIST.
          redis: { host: '127.0.0.1', port: server.port, connectionName: name },
          keyPrefix: 'bus:',
          l1: l1 && { maxStaleMs: MAX_STALE_MS },
        }),
        StampedeHealthModule,
      ],
      providers: [ProfileService],
    }).compile();
    apps.push(await app.init());
    const stampede = app.get(StampedeService);
    const events: string[] = [];
    stampede.on('stampede.bus.down', (e: StampedeEventMap['stampede.bus.down']) =>
      events.push(`down:${e.store}`),
    );
    stampede.on('stampede.bus.up', (e: StampedeEventMap['stampede.bus.up']) =>
      events.push(`up:${e.store}`),
    );
    return {
      profiles: app.get(ProfileService),
      stampede,
      health: app.get(StampedeHealthIndicator),
      events,
    };
  };

  const clients = async () =>
    ((await admin.call('CLIENT', 'LIST')) as string)
      .trim()
      .split('\n')
      .map((line) => Object.fromEntries(line.split(' ').map((kv) => kv.split('='))));

  /** No room for one more connection, then `name`'s subscriber is disconnected: it cannot come back. */
  const cutSubscriber = async (name: string, instance: { events: string[] }) => {
    const all = await clients();
    const subscriber = all.find((c) => c.name === name && c.flags?.includes('P'));
    expect(subscriber).toBeDefined();
    await admin.config('SET', 'maxclients', String(all.length - 1));
    await admin.call('CLIENT', 'KILL', 'ID', subscriber!.id);
    await waitFor(
      `${name} notices its bus is down`,
      () => instance.events.includes('down:redis'),
      10_000,
    );
  };

  /** Room again: the subscriber reconnects. */
  const restoreSubscriber = async (name: string, instance: { events: string[] }) => {
    await admin.config('SET', 'maxclients', '10000');
    await waitFor(
      `${name} notices its bus is back`,
      () => instance.events.includes('up:redis'),
      15_000,
    );
  };

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    admin = new Redis(server.url);
  });

  // A failed test leaves no limit behind for the next one.
  afterEach(() => admin.config('SET', 'maxclients', '10000'));

  afterAll(async () => {
    await admin?.config('SET', 'maxclients', '10000').catch(() => undefined);
    await Promise.all(apps.map((app) => app.close()));
    await admin?.quit();
    await server?.destroy();
  });

  it('serves the new value within maxStaleMs, says so in events and health, and clears L1 once the bus is back', async () => {
    const a = await start('instance-a');
    const b = await start('instance-b');
    const old = await a.profiles.profile('x');
    expect(await b.profiles.profile('x')).toEqual(old); // B holds it in L1 now
    expect(b.stampede.l1Stats()?.entries).toBe(1);

    await cutSubscriber('instance-b', b);
    expect((await b.health.isHealthy('cache')).cache).toMatchObject({
      status: 'up',
      store: 'redis',
      invalidationBus: 'down',
    });

    // A's broadcast cannot reach B. B re-reads Redis once its copy is older than maxStaleMs.
    await a.stampede.invalidate('profile:x');
    await waitFor(
      'B serves the new value',
      async () => (await b.profiles.profile('x')).load !== old.load,
      MAX_STALE_MS + 10_000,
    );
    expect(b.events).toEqual(['down:redis']); // once per transition
    expect(a.events).toEqual([]);

    // Room again: the subscriber reconnects, B says so once, and clears L1 (it missed messages).
    await restoreSubscriber('instance-b', b);
    expect(b.events).toEqual(['down:redis', 'up:redis']);
    expect(b.stampede.l1Stats()?.entries).toBe(0);
    const health = (await b.health.isHealthy('cache')).cache;
    expect(health).toMatchObject({ status: 'up' });
    expect(health).not.toHaveProperty('invalidationBus');
  });

  // A tag invalidation elsewhere gives the tag a new version in Redis; the values stamped with
  // the old one stay there. B must learn the new version (with L1 or without: the values it
  // reads from Redis carry the old stamp) within the bound.
  it.each([
    ['with L1', true, MAX_STALE_MS],
    ['without L1', false, 5000], // the default bound: without L1 it cannot be set
  ])('a tag invalidated elsewhere reaches it within maxStaleMs (%s)', async (label, l1, bound) => {
    const names = [`tags-a-${l1}`, `tags-b-${l1}`];
    const a = await start(names[0], l1);
    const b = await start(names[1], l1);
    const old = await a.profiles.tagged(label);
    expect(await b.profiles.tagged(label)).toEqual(old); // B knows the tag's version now

    await cutSubscriber(names[1], b);
    await a.stampede.invalidateTags([`t:${label}`]);
    await waitFor(
      'B serves the new value',
      async () => (await b.profiles.tagged(label)).load !== old.load,
      bound + 10_000,
    );
    await restoreSubscriber(names[1], b);
  });
});
