import { Injectable } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  Cacheable,
  StampedeConfigError,
  StampedeModule,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { REDIS_URL, deleteKeys, uniquePrefix } from './support/redis';
import { waitFor } from '../../../test/support/wait';

const loads = new Map<string, number>();
const countLoad = (key: string) => {
  const n = (loads.get(key) ?? 0) + 1;
  loads.set(key, n);
  return n;
};

@Injectable()
class ArticleService {
  @Cacheable({ key: (id: string) => `article:${id}`, ttl: 60_000 })
  async find(id: string): Promise<{ id: string; load: number }> {
    return { id, load: countLoad(`article:${id}`) };
  }
}

/** get / set / delete / clear of StampedeService, over two app instances on one Redis. */
describe('StampedeService get, set, delete and clear (two instances, real Redis)', () => {
  jest.setTimeout(60_000);
  const prefix = uniquePrefix('entries');
  const otherPrefix = uniquePrefix('entries-other');
  let redis: Redis;
  const apps: TestingModule[] = [];

  const start = async (keyPrefix = prefix) => {
    const app = await Test.createTestingModule({
      imports: [StampedeModule.forRoot({ redis: REDIS_URL, keyPrefix, l1: true })],
      providers: [ArticleService],
    }).compile();
    apps.push(await app.init());
    return { stampede: app.get(StampedeService), articles: app.get(ArticleService) };
  };
  let a: Awaited<ReturnType<typeof start>>;
  let b: Awaited<ReturnType<typeof start>>;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    a = await start();
    b = await start();
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await deleteKeys(redis, prefix);
    await deleteKeys(redis, otherPrefix);
    await redis.quit();
  });

  it('a value set on one instance is what get, getOrLoad and the decorated method return on the other', async () => {
    await a.stampede.set('article:1', { id: '1', load: 0 });
    expect(await b.stampede.get('article:1')).toEqual({ id: '1', load: 0 });
    const loader = jest.fn(async () => ({ id: '1', load: -1 }));
    expect(await b.stampede.getOrLoad('article:1', loader)).toEqual({ id: '1', load: 0 });
    expect(await b.articles.find('1')).toEqual({ id: '1', load: 0 });
    expect(loader).not.toHaveBeenCalled();
    expect(loads.get('article:1')).toBeUndefined();
  });

  it('get returns undefined for a key never set, and runs no loader', async () => {
    expect(await a.stampede.get('article:none')).toBeUndefined();
    expect(await redis.exists(`${prefix}{article:none}`)).toBe(0);
  });

  it("set replaces the value held in the other instance's L1", async () => {
    const first = await b.articles.find('2'); // loaded once, now in B's L1 (and A's on read)
    expect(await a.articles.find('2')).toEqual(first);
    await a.stampede.set('article:2', { id: '2', load: 100 });
    expect(await a.stampede.get('article:2')).toEqual({ id: '2', load: 100 }); // A's own L1
    await waitFor(
      "B's L1 drops the old value",
      async () => (await b.articles.find('2')).load === 100,
    );
    expect(loads.get('article:2')).toBe(1);
  });

  it('set honours ttl, grace, jitter and the module defaultTtl in Redis', async () => {
    await a.stampede.set('ttl:default', 'd');
    await a.stampede.set('ttl:given', 'g', { ttl: '2s', grace: '3s' });
    const defaultTtl = await redis.pttl(`${prefix}{ttl:default}`);
    expect(defaultTtl).toBeGreaterThan(2000 + 3000); // the module's 60 s
    expect(defaultTtl).toBeLessThanOrEqual(60_000);
    const given = await redis.pttl(`${prefix}{ttl:given}`);
    expect(given).toBeGreaterThan(0);
    expect(given).toBeLessThanOrEqual(5000); // ttl + grace
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        a.stampede.set(`ttl:jitter:${i}`, i, { ttl: 100_000, jitter: 0.5 }),
      ),
    );
    const ttls = await Promise.all(
      Array.from({ length: 20 }, (_, i) => redis.pttl(`${prefix}{ttl:jitter:${i}}`)),
    );
    expect(new Set(ttls.map((t) => Math.round(t / 1000))).size).toBeGreaterThan(1);
    expect(Math.min(...ttls)).toBeGreaterThan(40_000);
  });

  it('a value set with a short ttl is gone for get once it expires', async () => {
    await a.stampede.set('short', 'soon gone', { ttl: 300 });
    expect(await b.stampede.get('short')).toBe('soon gone');
    await waitFor('the value expires', async () => (await b.stampede.get('short')) === undefined);
    expect(await a.stampede.get('short')).toBeUndefined();
  });

  it('tags given to set reach the value: invalidateTags on the other instance drops it', async () => {
    await a.stampede.set('tagged:1', 'x', { tags: ['group:1'] });
    expect(await a.stampede.get('tagged:1')).toBe('x');
    expect(await b.stampede.get('tagged:1')).toBe('x');
    await b.stampede.invalidateTags(['group:1']);
    expect(await b.stampede.get('tagged:1')).toBeUndefined();
    await waitFor(
      'A learns the tag version',
      async () => (await a.stampede.get('tagged:1')) === undefined,
    );
  });

  it('delete is invalidate: the value is gone on both instances, the next call loads', async () => {
    const first = await a.articles.find('3');
    expect(await b.articles.find('3')).toEqual(first); // in both L1s
    await b.stampede.delete('article:3');
    expect(await redis.exists(`${prefix}{article:3}`)).toBe(0);
    await waitFor(
      'A drops it from L1',
      async () => (await a.stampede.get('article:3')) === undefined,
    );
    expect((await a.articles.find('3')).load).toBe(2);
  });

  it('clear drops every value of the prefix on every instance, without deleting a key', async () => {
    const ids = Array.from({ length: 30 }, (_, i) => `c${i}`);
    for (const id of ids) await a.articles.find(id);
    for (const id of ids) await b.articles.find(id); // every value in both L1s
    const other = await start(otherPrefix);
    await other.stampede.set('article:c0', { id: 'c0', load: 0 });
    const keysBefore = await redis.keys(`${prefix}{article:c*`);
    expect(keysBefore).toHaveLength(ids.length);

    await a.stampede.clear();

    // The old values stay in Redis (they expire by themselves) but are misses everywhere.
    expect(await redis.keys(`${prefix}{article:c*`)).toHaveLength(ids.length);
    for (const id of ids) expect(await a.stampede.get(`article:${id}`)).toBeUndefined();
    await waitFor('B learns the new prefix version', async () =>
      (await Promise.all(ids.map((id) => b.stampede.get(`article:${id}`)))).every(
        (v) => v === undefined,
      ),
    );
    const reloaded = await Promise.all(ids.map((id) => b.articles.find(id)));
    expect(reloaded.every((v) => v.load === 2)).toBe(true);
    expect((await a.articles.find('c0')).load).toBe(2); // A reads B's new value
    for (const id of ids) expect(loads.get(`article:${id}`)).toBe(2);
    // Another prefix is another cache.
    expect(await other.stampede.get('article:c0')).toEqual({ id: 'c0', load: 0 });
  });

  it('clear reaches the values getOrLoadMany loaded, on both instances', async () => {
    const keys = ['many:1', 'many:2', 'many:3'];
    let calls = 0;
    const loadMissing = (missing: string[]) => {
      calls++;
      return Object.fromEntries(missing.map((k) => [k, `${k}@${calls}`]));
    };
    expect(await a.stampede.getOrLoadMany(keys, loadMissing)).toEqual(keys.map((k) => `${k}@1`));
    expect(await b.stampede.getOrLoadMany(keys, loadMissing)).toEqual(keys.map((k) => `${k}@1`));
    expect(calls).toBe(1);
    await b.stampede.clear();
    for (const key of keys) expect(await b.stampede.get(key)).toBeUndefined();
    await waitFor('A learns the new prefix version', async () =>
      (await Promise.all(keys.map((k) => a.stampede.get(k)))).every((v) => v === undefined),
    );
    expect(await a.stampede.getOrLoadMany(keys, loadMissing)).toEqual(keys.map((k) => `${k}@2`));
    expect(calls).toBe(2);
  });

  it('values set or loaded after a clear are served again', async () => {
    await b.stampede.clear();
    await a.stampede.set('after', 'new');
    expect(await b.stampede.get('after')).toBe('new');
    expect(await a.stampede.getOrLoad('after', () => 'loaded')).toBe('new');
  });

  it('bad options are refused with a clear error', async () => {
    await expect(a.stampede.set('bad', 'x', { ttl: 'soon' })).rejects.toThrow(StampedeConfigError);
    await expect(a.stampede.set('bad', 'x', { jitter: 1 })).rejects.toThrow(/jitter/);
    await expect(a.stampede.set('bad', 'x', { tags: [''] })).rejects.toThrow(/tags/);
    await expect(a.stampede.set('bad', undefined)).rejects.toThrow(/delete/);
    expect(await redis.exists(`${prefix}{bad}`)).toBe(0);
  });
});
