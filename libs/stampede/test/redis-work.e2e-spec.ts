import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  DistLock,
  RedisStore,
  SingleFlight,
  StampedeModule,
  StampedeService,
  XFetch,
} from '@nest-redis-resilience/stampede';
import { delay, RoundTripProxy, ThrowawayRedis } from './support/redis';

const LOCK_TTL = 5000;

@Injectable()
class CatalogService {
  loads = 0;
  loaderMs = 0;

  /** The full stack ("two-tier"): single-flight, XFetch, distributed lock. */
  @Cacheable({ key: (id: string) => `item:${id}`, ttl: 60_000 })
  @SingleFlight()
  @XFetch()
  @DistLock({ ttl: LOCK_TTL, poll: 5 })
  async item(id: string): Promise<{ id: string }> {
    this.loads++;
    if (this.loaderMs) await delay(this.loaderMs);
    return { id };
  }
}

/** Calls per command since the last CONFIG RESETSTAT, without the test's own INFO and CONFIG. */
async function commandCalls(admin: Redis): Promise<Record<string, number>> {
  const calls: Record<string, number> = {};
  for (const line of (await admin.info('commandstats')).split('\r\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (match && !/^(info|config)/.test(match[1])) calls[match[1]] = Number(match[2]);
  }
  return calls;
}

const total = (calls: Record<string, number>) => Object.values(calls).reduce((a, b) => a + b, 0);

async function startApp(url: string, prefix: string): Promise<TestingModule> {
  const moduleRef = await Test.createTestingModule({
    imports: [StampedeModule.forRoot({ redis: url, keyPrefix: prefix, operationTimeout: 5000 })],
    providers: [CatalogService],
  }).compile();
  return moduleRef.init();
}

/*
 * INFO commandstats counts every command, including those a script runs: a redis-server of this
 * test, so that nothing else is counted. The round trips are counted by a proxy in front of it.
 */
describe('Redis work per request (a redis-server of this test)', () => {
  jest.setTimeout(60_000);
  let server: ThrowawayRedis;
  let proxy: RoundTripProxy;
  let admin: Redis;
  const apps: TestingModule[] = [];

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    proxy = await RoundTripProxy.start(server.port);
    admin = new Redis(server.url);
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await admin?.quit();
    await proxy?.close();
    await server?.destroy();
  });

  it('a load costs 3 commands in 3 round trips; a hit is exactly one GET', async () => {
    const app = await startApp(proxy.url, 'work:');
    apps.push(app);
    const catalog = app.get(CatalogService);

    await admin.config('RESETSTAT');
    proxy.reset();
    expect(await catalog.item('a')).toEqual({ id: 'a' });
    const missTurns = proxy.turns;
    const miss = await commandCalls(admin);
    expect(catalog.loads).toBe(1);
    // GET; SET NX of a lock mark in the value key; the fill's SET GET of the value over it.
    // Nobody waited: no PUBLISH.
    expect(miss).toEqual({ get: 1, set: 2 });
    expect(missTurns).toBeLessThanOrEqual(3);

    await admin.config('RESETSTAT');
    proxy.reset();
    for (let i = 0; i < 100; i++) expect(await catalog.item('a')).toEqual({ id: 'a' });
    expect(await commandCalls(admin)).toEqual({ get: 100 });
    expect(proxy.turns).toBe(100);
    expect(catalog.loads).toBe(1);
    expect(app.get(StampedeService).metrics()['CatalogService.item'].storeErrors).toBe(0);
  });

  it('with L1: a hit costs no command, a load 3, an early recomputation 4 (5 when the value would expire within its lock TTL)', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({ redis: server.url, keyPrefix: 'l1work:', l1: true })],
    }).compile();
    const app = await moduleRef.init();
    apps.push(app);
    const stampede = app.get(StampedeService);
    let loads = 0;
    const loader = async () => {
      await delay(20); // XFetch's delta: with a large beta, due from half the TTL on
      return ++loads;
    };
    const policy = { ttl: 2000, lock: true, xfetch: { beta: 1000 } };

    await admin.config('RESETSTAT');
    expect(await stampede.getOrLoad('a', loader, policy)).toBe(1);
    const load = total(await commandCalls(admin));
    expect(loads).toBe(1);
    expect(load).toBe(3);

    await admin.config('RESETSTAT');
    for (let i = 0; i < 100; i++) await stampede.getOrLoad('a', loader, policy);
    expect(total(await commandCalls(admin))).toBe(0);

    await delay(1100); // past half the TTL: the next hit recomputes in the background
    await admin.config('RESETSTAT');
    expect(await stampede.getOrLoad('a', loader, policy)).toBe(1);
    for (let i = 0; i < 200 && loads < 2; i++) await delay(10);
    expect(loads).toBe(2);
    // The try-lock's SET NX of the lock key with a GET of the value, and a PEXPIRE that keeps the
    // value for the lock's TTL (the value has 1 s left, the lock 5 s: callers of other instances
    // that find it expired wait for this refresh); then the fill's SET of the value and GETDEL
    // of the lock key.
    for (let i = 0; i < 200 && ((await commandCalls(admin)).getdel ?? 0) < 1; i++) await delay(10);
    expect(await commandCalls(admin)).toEqual({ set: 2, get: 1, pexpire: 1, getdel: 1 });
    expect(await stampede.getOrLoad('a', loader, policy)).toBe(2);
  });

  it('3 instances: a fill notifies only the instances waiting for that key', async () => {
    const trio = await Promise.all([1, 2, 3].map(() => startApp(server.url, 'fanout:')));
    apps.push(...trio);
    const services = trio.map((app) => app.get(CatalogService));
    const stores = trio.map((app) => app.get(StampedeService).store as RedisStore);
    const metrics = () =>
      trio.map((app) => app.get(StampedeService).metrics()['CatalogService.item']);
    for (const s of services) s.loaderMs = 100;

    // Each instance fills keys of its own: nobody waits, nothing is published or received.
    await admin.config('RESETSTAT');
    await Promise.all(
      services.flatMap((s, i) => Array.from({ length: 20 }, (_, k) => s.item(`solo-${i}-${k}`))),
    );
    expect(services.map((s) => s.loads)).toEqual([20, 20, 20]);
    expect((await commandCalls(admin)).publish ?? 0).toBe(0);
    expect(stores.map((s) => s.notificationsReceived)).toEqual([0, 0, 0]);

    // Instances 1 and 2 race for 20 shared keys; instance 3 is busy with keys of its own.
    await admin.config('RESETSTAT');
    const shared = Array.from({ length: 20 }, (_, k) => `shared-${k}`);
    await Promise.all([
      ...shared.flatMap((id) => [services[0].item(id), services[1].item(id)]),
      ...Array.from({ length: 20 }, (_, k) => services[2].item(`busy-${k}`)),
    ]);
    expect(services[0].loads + services[1].loads).toBe(40 + 20); // one load per shared key
    const [m1, m2, m3] = metrics();
    const waits = m1.lockWaits + m2.lockWaits;
    expect(waits).toBeGreaterThan(0);
    expect(waits).toBeLessThanOrEqual(20);
    // The waiters were woken by the fill, not by their 5 s lock running out.
    expect((m1.lockWaitMs + m2.lockWaitMs) / waits).toBeLessThan(LOCK_TTL / 2);
    expect(stores[0].notificationsReceived).toBeLessThanOrEqual(m1.lockWaits);
    expect(stores[1].notificationsReceived).toBeLessThanOrEqual(m2.lockWaits);
    expect(stores[0].notificationsReceived + stores[1].notificationsReceived).toBeGreaterThan(0);
    expect(m3.lockWaits).toBe(0);
    expect(stores[2].notificationsReceived).toBe(0);
    const calls = await commandCalls(admin);
    expect(calls.publish ?? 0).toBeLessThanOrEqual(20);
    expect(calls.subscribe ?? 0).toBeLessThanOrEqual(20);
  });
});
