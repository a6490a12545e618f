import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Redis } from 'ioredis';
import request from 'supertest';
import {
  dbLookups,
  deleteKeys,
  REDIS_URL,
  repositoryOf,
  runId,
  startApp,
  tempSqlite,
  urlKeyOf,
  waitFor,
} from './support/env';
import { concurrentGets, listen } from './support/http';

/**
 * Cache stampede on the redirect path: when a hot code's cache entry expires, a flood of
 * redirects costs one database lookup, on one app or on two apps that share Redis and the
 * database (separate Nest apps, separate connections).
 */
describe('shortener: redirects of an expired hot code (stampede)', () => {
  const id = runId('stampede');
  const prefix = `test:shortener:${id}:`;
  const sqlite = tempSqlite(id);
  const config = {
    DATABASE_URL: sqlite.url,
    DATABASE_TABLE: `stampede_${id}`,
    REDIS_KEY_PREFIX: prefix,
    CACHE_TTL: '60s',
  };
  const target = 'https://example.com/hot/stampede';
  let a: NestFastifyApplication;
  let b: NestFastifyApplication;
  let baseA: string;
  let baseB: string;
  let redis: Redis;
  let code: string;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    a = await startApp(config);
    b = await startApp(config);
    baseA = await listen(a);
    baseB = await listen(b);
    const created = await request(baseA).post('/urls').send({ url: target }).expect(201);
    code = created.body.code;
  });

  afterAll(async () => {
    await b?.close();
    if (a) {
      await repositoryOf(a).dropTable();
      await a.close();
    }
    await deleteKeys(redis, prefix);
    await redis.quit();
    sqlite.remove();
  });

  /** Lets Redis expire the cached entry of `code` now, and waits until it is gone. */
  async function expire(): Promise<void> {
    const key = urlKeyOf(a, prefix, code);
    await request(baseA).get(`/${code}`).expect(302); // make sure an entry exists
    expect(await redis.exists(key)).toBe(1);
    await redis.pexpire(key, 1);
    expect(await waitFor(async () => (await redis.exists(key)) === 0, 2000)).toBe(true);
  }

  const lookups = async () => (await dbLookups(a)) + (await dbLookups(b));

  it('500 concurrent redirects on one app: all 302 to the URL, exactly one database lookup', async () => {
    await expire();
    const before = await lookups();
    const answers = await concurrentGets(`${baseA}/${code}`, 500);
    expect(answers.filter((r) => r.status === 302 && r.location === target)).toHaveLength(500);
    expect((await lookups()) - before).toBe(1);
  });

  it('500 concurrent redirects split over two apps: all 302, still exactly one database lookup', async () => {
    await expire();
    const before = await lookups();
    const answers = (
      await Promise.all([
        concurrentGets(`${baseA}/${code}`, 250),
        concurrentGets(`${baseB}/${code}`, 250),
      ])
    ).flat();
    expect(answers.filter((r) => r.status === 302 && r.location === target)).toHaveLength(500);
    expect((await lookups()) - before).toBe(1);
    expect(await dbLookups(a)).toBeGreaterThan(0);
  });

  it('500 concurrent requests for an unknown code over two apps: all 404, one database lookup', async () => {
    const before = await lookups();
    const answers = (
      await Promise.all([
        concurrentGets(`${baseA}/nosuch42`, 250),
        concurrentGets(`${baseB}/nosuch42`, 250),
      ])
    ).flat();
    expect(answers.filter((r) => r.status === 404)).toHaveLength(500);
    expect((await lookups()) - before).toBe(1);
  });

  it('an unknown code is cached for the miss TTL (set by the lookup), a known one for CACHE_TTL', async () => {
    await request(baseA).get('/nosuch43').expect(404);
    const key = urlKeyOf(a, prefix, 'nosuch43');
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(30_000); // MISS_CACHE_TTL (default 30 s), CACHE_TTL is 60 s
    const created = await request(baseB)
      .post('/urls')
      .send({ url: 'https://example.com/created/after/miss' })
      .expect(201);
    const fresh = urlKeyOf(a, prefix, created.body.code);
    await request(baseA).get(`/${created.body.code}`).expect(302);
    expect(await redis.pttl(fresh)).toBeGreaterThan(30_000);
  });
});
