import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  CacheableMany,
  DistLock,
  StampedeModule,
  StampedeModuleOptions,
  StampedeService,
  StampedeTimeoutError,
} from '@nest-redis-resilience/stampede';
import { waitFor } from '../../../test/support/wait';
import { delay, deleteKeys, REDIS_URL, ThrowawayRedis, uniquePrefix } from './support/redis';

const TTL = 60_000;
const LOCKED = { ttl: TTL, lock: { ttl: 10_000 } };

/** A batch loader that counts its calls and how often each key was loaded. */
class CountingLoader {
  calls: string[][] = [];
  perKey = new Map<string, number>();

  constructor(
    private readonly ms = 50,
    private readonly leaveOut: (key: string) => boolean = () => false,
  ) {}

  readonly load = async (keys: string[]): Promise<Record<string, string>> => {
    this.calls.push(keys);
    for (const key of keys) this.perKey.set(key, (this.perKey.get(key) ?? 0) + 1);
    await delay(this.ms);
    return Object.fromEntries(keys.filter((k) => !this.leaveOut(k)).map((k) => [k, `v:${k}`]));
  };
}

@Injectable()
class ProductService {
  readonly batches: number[][] = [];

  @CacheableMany({ key: (id: number) => `product:${id}`, ttl: TTL })
  @DistLock({ ttl: 10_000 })
  async find(ids: number[]): Promise<string[]> {
    this.batches.push(ids);
    await delay(20);
    return ids.map((id) => `product-${id}`);
  }

  @CacheableMany({ key: (id: number) => `price:${id}`, ttl: TTL, returns: 'map' })
  async prices(ids: number[], currency: string): Promise<Map<number, string>> {
    this.batches.push(ids);
    return new Map(ids.filter((id) => id !== 404).map((id) => [id, `${id} ${currency}`]));
  }
}

async function startApp(options: StampedeModuleOptions): Promise<TestingModule> {
  const moduleRef = await Test.createTestingModule({
    imports: [StampedeModule.forRoot({ operationTimeout: 5000, ...options })],
    providers: [ProductService],
  }).compile();
  return moduleRef.init();
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

const range = (from: number, n: number, name: string) =>
  Array.from({ length: n }, (_, i) => `${name}:${from + i}`);

describe('getOrLoadMany on two instances (real Redis)', () => {
  jest.setTimeout(60_000);
  const prefix = uniquePrefix('many');
  let redis: Redis;
  const apps: TestingModule[] = [];
  let services: StampedeService[];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    for (let i = 0; i < 2; i++) apps.push(await startApp({ redis: REDIS_URL, keyPrefix: prefix }));
    services = apps.map((app) => app.get(StampedeService));
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('100 keys, 50 cached, on both instances at once: each missing key loaded once, at most 2 loader calls', async () => {
    for (let round = 0; round < 6; round++) {
      const keys = range(0, 100, `r${round}`);
      const primer = new CountingLoader(0);
      await services[0].getOrLoadMany(
        keys.filter((_, i) => i % 2 === 0),
        primer.load,
        LOCKED,
      );
      const loader = new CountingLoader();
      // Both at once, the second in reverse order, or the second while the first loads.
      const second = round % 3 === 1 ? [...keys].reverse() : keys;
      const results = await Promise.all([
        services[0].getOrLoadMany(keys, loader.load, LOCKED),
        delay(round % 3 === 2 ? 10 : 0).then(() =>
          services[1].getOrLoadMany(second, loader.load, LOCKED),
        ),
      ]);
      expect(results[0]).toEqual(keys.map((k) => `v:${k}`));
      expect(results[1]).toEqual(second.map((k) => `v:${k}`));
      expect(loader.calls.length).toBeGreaterThanOrEqual(1);
      expect(loader.calls.length).toBeLessThanOrEqual(2);
      const missing = keys.filter((_, i) => i % 2 === 1);
      expect([...loader.perKey.keys()].sort()).toEqual([...missing].sort());
      for (const key of missing) expect(loader.perKey.get(key)).toBe(1);
    }
  });

  it('keys another caller of this instance is loading are joined, not loaded again', async () => {
    const slow = new CountingLoader(200);
    const first = services[0].getOrLoad(
      'join:a',
      async () => (await slow.load(['join:a']))['join:a'],
      LOCKED,
    );
    await delay(20);
    const loader = new CountingLoader(0);
    const values = await services[0].getOrLoadMany(['join:a', 'join:b'], loader.load, LOCKED);
    expect(values).toEqual(['v:join:a', 'v:join:b']);
    expect(await first).toBe('v:join:a');
    expect(loader.calls).toEqual([['join:b']]);
  });

  it('values in key order, duplicates included; a key the loader leaves out is undefined and not cached', async () => {
    const loader = new CountingLoader(0, (key) => key.endsWith(':gone'));
    const keys = ['part:b', 'part:gone', 'part:a', 'part:b'];
    expect(await services[0].getOrLoadMany(keys, loader.load, LOCKED)).toEqual([
      'v:part:b',
      undefined,
      'v:part:a',
      'v:part:b',
    ]);
    expect(loader.calls).toEqual([['part:b', 'part:gone', 'part:a']]);
    expect(await redis.exists(`${prefix}{part:gone}`)).toBe(0);
    // Its lock was released: the other instance loads it at once, and only it.
    const again = new CountingLoader(0);
    expect(await services[1].getOrLoadMany(keys, again.load, LOCKED)).toEqual([
      'v:part:b',
      'v:part:gone',
      'v:part:a',
      'v:part:b',
    ]);
    expect(again.calls).toEqual([['part:gone']]);
  });

  it('a loader error rejects the calls waiting for its keys; the others are loaded and cached', async () => {
    const failing = async (keys: string[]): Promise<Record<string, string>> => {
      await delay(100);
      throw new Error(`backend down for ${keys.join(',')}`);
    };
    const ok = new CountingLoader(0);
    const [bad, shared, apart] = await Promise.allSettled([
      services[0].getOrLoadMany(['err:a', 'err:b'], failing, LOCKED),
      // err:b is in flight above: this call joins it and fails with it, err:c is loaded
      delay(20).then(() => services[0].getOrLoadMany(['err:b', 'err:c'], ok.load, LOCKED)),
      services[0].getOrLoadMany(['err:d'], ok.load, LOCKED),
    ]);
    expect(bad.status).toBe('rejected');
    expect(shared.status).toBe('rejected');
    expect((shared as PromiseRejectedResult).reason).toEqual(
      new Error('backend down for err:a,err:b'),
    );
    expect(apart).toEqual({ status: 'fulfilled', value: ['v:err:d'] });
    expect(ok.calls.flat().sort()).toEqual(['err:c', 'err:d']);
    // Nothing cached for the failed keys, and their locks were released: a retry loads them.
    const retry = new CountingLoader(0);
    expect(
      await services[1].getOrLoadMany(['err:a', 'err:b', 'err:c'], retry.load, LOCKED),
    ).toEqual(['v:err:a', 'v:err:b', 'v:err:c']);
    expect(retry.calls).toEqual([['err:a', 'err:b']]);
  });

  it('null is cached; tags: invalidateTags drops the values of a batch on both instances', async () => {
    const policy = { ttl: TTL, lock: true, tags: ['shelf:1'] };
    const loader = new CountingLoader(0);
    const load = async (keys: string[]) => ({ ...(await loader.load(keys)), 'tag:nil': null });
    const keys = ['tag:a', 'tag:nil'];
    expect(await services[0].getOrLoadMany(keys, load, policy)).toEqual(['v:tag:a', null]);
    expect(await services[1].getOrLoadMany(keys, load, policy)).toEqual(['v:tag:a', null]);
    expect(loader.calls).toHaveLength(1);
    await services[1].invalidateTags(['shelf:1']);
    expect(await services[0].getOrLoadMany(keys, load, policy)).toEqual(['v:tag:a', null]);
    // Loaded again, once each (in one call or two: their locks were just filled, so they are
    // taken on a second attempt each).
    expect(loader.calls.slice(1).flat().sort()).toEqual([...keys].sort());
  });

  it('grace: stale values are served at once while one background call refreshes them', async () => {
    const policy = { ttl: 300, grace: 60_000, lock: true };
    const loader = new CountingLoader(0);
    const keys = ['grace:a', 'grace:b', 'grace:c'];
    await services[0].getOrLoadMany(keys, loader.load, policy);
    await delay(400); // past the TTL, within grace
    const slow = new CountingLoader(300);
    const stale = await services[1].getOrLoadMany(keys, slow.load, policy);
    expect(stale).toEqual(keys.map((k) => `v:${k}`));
    expect(services[1].metrics().getOrLoadMany.staleServes).toBeGreaterThanOrEqual(3);
    await waitFor('the refresh to finish', () => slow.perKey.size === 3 && slow.calls.length > 0);
    expect([...slow.perKey.values()]).toEqual([1, 1, 1]);
  });

  it('rejects keys that are not an array of strings, and a loader that is not a function', async () => {
    await expect(
      services[0].getOrLoadMany('a' as unknown as string[], async () => ({})),
    ).rejects.toThrow(/keys must be an array of strings/);
    await expect(
      services[0].getOrLoadMany(['a', 1 as unknown as string], async () => ({})),
    ).rejects.toThrow(/keys must be an array of strings/);
    await expect(services[0].getOrLoadMany(['a'], undefined as never)).rejects.toThrow(
      /loadMissing must be a function/,
    );
    expect(await services[0].getOrLoadMany([], async () => ({}))).toEqual([]);
  });

  it('@CacheableMany with @DistLock on both instances: the method runs with the missing ids only', async () => {
    const products = apps.map((app) => app.get(ProductService));
    const ids = Array.from({ length: 40 }, (_, i) => i);
    expect(await products[0].find(ids.slice(0, 20))).toEqual(
      ids.slice(0, 20).map((id) => `product-${id}`),
    );
    const results = await Promise.all(products.map((p) => p.find(ids)));
    for (const values of results) expect(values).toEqual(ids.map((id) => `product-${id}`));
    const loaded = [...products[0].batches, ...products[1].batches].flat();
    expect(loaded.sort((a, b) => a - b)).toEqual(ids);
    expect(products[0].batches.length + products[1].batches.length).toBeLessThanOrEqual(3);
  });

  it('@CacheableMany returning a Map: ids without a value are left out, and loaded again next time', async () => {
    const product = apps[0].get(ProductService);
    product.batches.length = 0;
    const first = await product.prices([1, 404, 2], 'EUR');
    expect(first).toEqual(
      new Map([
        [1, '1 EUR'],
        [2, '2 EUR'],
      ]),
    );
    expect(await product.prices([2, 404, 3], 'EUR')).toEqual(
      new Map([
        [2, '2 EUR'],
        [3, '3 EUR'],
      ]),
    );
    expect(product.batches).toEqual([
      [1, 404, 2],
      [404, 3],
    ]);
    await expect(product.prices('1' as unknown as number[], 'EUR')).rejects.toThrow(
      /takes an array of ids first/,
    );
  });
});

/*
 * INFO commandstats counts every command: a redis-server of this test, so that nothing else is
 * counted.
 */
describe('getOrLoadMany: Redis commands (a redis-server of this test)', () => {
  jest.setTimeout(60_000);
  let server: ThrowawayRedis;
  let admin: Redis;
  let app: TestingModule;

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    admin = new Redis(server.url);
    app = await startApp({ redis: server.url, keyPrefix: 'cmds:' });
  });

  afterAll(async () => {
    await app?.close();
    await admin?.quit();
    await server?.destroy();
  });

  it('100 keys, 50 cached: one MGET, one loader call; all cached: one MGET and nothing else', async () => {
    const service = app.get(StampedeService);
    const keys = range(0, 100, 'k');
    await service.getOrLoadMany(
      keys.filter((_, i) => i % 2 === 0),
      new CountingLoader(0).load,
      LOCKED,
    );
    await admin.config('RESETSTAT');
    const loader = new CountingLoader(0);
    await service.getOrLoadMany(keys, loader.load, LOCKED);
    expect(loader.calls).toHaveLength(1);
    let calls = await commandCalls(admin);
    expect(calls.mget).toBe(1);
    expect(calls.get).toBeUndefined();

    await admin.config('RESETSTAT');
    expect(await service.getOrLoadMany(keys, loader.load, LOCKED)).toEqual(
      keys.map((k) => `v:${k}`),
    );
    calls = await commandCalls(admin);
    expect(calls).toEqual({ mget: 1 });
    expect(loader.calls).toHaveLength(1);
  });
});

describe('getOrLoadMany without Redis (the in-memory store)', () => {
  let app: TestingModule;

  beforeAll(async () => {
    app = await startApp({ l1: true });
  });

  afterAll(() => app.close());

  it('concurrent batches over the same keys: each key loaded once', async () => {
    const service = app.get(StampedeService);
    const keys = range(0, 50, 'mem');
    const loader = new CountingLoader(20);
    const results = await Promise.all(
      [0, 1, 2, 3].map(() => service.getOrLoadMany(keys, loader.load, { ttl: TTL })),
    );
    for (const values of results) expect(values).toEqual(keys.map((k) => `v:${k}`));
    for (const key of keys) expect(loader.perKey.get(key)).toBe(1);
    expect(loader.calls).toHaveLength(1);
    const m = service.metrics().getOrLoadMany;
    expect(m.calls).toBe(200);
    expect(m.joins).toBe(150);
    // L1 answers the next batch
    expect(await service.getOrLoadMany(keys, loader.load, { ttl: TTL })).toHaveLength(50);
    expect(service.metrics().getOrLoadMany.l1Hits).toBe(50);
  });

  it('a hard timeout rejects the call with a StampedeTimeoutError and aborts the loader once every key gave up', async () => {
    const service = app.get(StampedeService);
    let signal: AbortSignal | undefined;
    // Never answers: ends when its signal aborts.
    const slow = (_keys: string[], s: AbortSignal) =>
      new Promise<Record<string, string>>((_resolve, reject) => {
        signal = s;
        s.addEventListener('abort', () => reject(s.reason as Error));
      });
    await expect(
      service.getOrLoadMany(['slow:a', 'slow:b'], slow, { ttl: TTL, timeout: 100 }),
    ).rejects.toThrow(StampedeTimeoutError);
    expect(signal?.aborted).toBe(true);
  });
});

describe('getOrLoadMany while Redis is down (a redis-server of this test)', () => {
  jest.setTimeout(60_000);
  let server: ThrowawayRedis;
  let app: TestingModule;

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    app = await startApp({ redis: server.url, operationTimeout: 1000 });
  });

  afterAll(async () => {
    await app?.close();
    await server?.destroy();
  });

  it('answers the values held here without a load, and loads the others in one call; caches again once Redis is back', async () => {
    const service = app.get(StampedeService);
    const loader = new CountingLoader(0);
    await service.getOrLoadMany(['down:a', 'down:b'], loader.load, LOCKED);
    await server.stop();
    const keys = ['down:a', 'down:b', 'down:c', 'down:d'];
    expect(await service.getOrLoadMany(keys, loader.load, LOCKED)).toEqual(
      keys.map((k) => `v:${k}`),
    );
    expect(loader.calls).toEqual([
      ['down:a', 'down:b'],
      ['down:c', 'down:d'],
    ]);
    expect(service.metrics().getOrLoadMany.storeErrors).toBeGreaterThan(0);

    await server.start();
    await waitFor('the batch to be cached in Redis again', async () => {
      await service.getOrLoadMany(['down:e'], loader.load, LOCKED);
      const admin = new Redis(server.url);
      try {
        return (await admin.exists('stampede:{down:e}')) === 1;
      } finally {
        admin.disconnect();
      }
    });
  });
});
