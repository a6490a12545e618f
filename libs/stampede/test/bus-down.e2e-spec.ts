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

  const start = async (name: string) => {
    const app = await Test.createTestingModule({
      imports: [
        StampedeModule.forRoot({
          // The name tells this instance's connections apart in CLIENT LIST.
          redis: { host: '127.0.0.1', port: server.port, connectionName: name },
          keyPrefix: 'bus:',
          l1: { maxStaleMs: MAX_STALE_MS },
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

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    admin = new Redis(server.url);
  });

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

    // No room for one more connection, then B's subscriber is disconnected: it cannot come back.
    const all = await clients();
    const subscriber = all.find((c) => c.name === 'instance-b' && c.flags?.includes('P'));
    expect(subscriber).toBeDefined();
    await admin.config('SET', 'maxclients', String(all.length - 1));
    await admin.call('CLIENT', 'KILL', 'ID', subscriber!.id);
    await waitFor('B notices its bus is down', () => b.events.includes('down:redis'), 10_000);
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
    await admin.config('SET', 'maxclients', '10000');
    await waitFor('B notices its bus is back', () => b.events.includes('up:redis'), 15_000);
    expect(b.events).toEqual(['down:redis', 'up:redis']);
    expect(b.stampede.l1Stats()?.entries).toBe(0);
    expect((await b.health.isHealthy('cache')).cache).toMatchObject({
      status: 'up',
      invalidationBus: 'up',
    });
  });
});
