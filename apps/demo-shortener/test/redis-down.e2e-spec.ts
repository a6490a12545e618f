import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Redis } from 'ioredis';
import request from 'supertest';
import {
  dbLookups,
  repositoryOf,
  runId,
  startApp,
  tempSqlite,
  urlKeyOf,
  waitFor,
} from './support/env';
import { ThrowawayRedis } from '../../../support/throwaway-redis';

/**
 * Redis dies (SIGKILL of a redis-server this test started): redirects keep working from the
 * database without waiting for Redis, /health says the app is degraded (still ready), and caching resumes by
 * itself when Redis is back on the same port.
 */
describe('shortener: Redis killed and restarted', () => {
  const id = runId('redisdown');
  const sqlite = tempSqlite(id);
  const target = 'https://example.com/survives-redis';
  let server: ThrowawayRedis;
  let app: NestFastifyApplication;
  let http: ReturnType<typeof request>;
  let code: string;

  beforeAll(async () => {
    server = await ThrowawayRedis.start();
    app = await startApp({
      DATABASE_URL: sqlite.url,
      DATABASE_TABLE: `redisdown_${id}`,
      REDIS_URL: server.url,
      REDIS_KEY_PREFIX: `test:shortener:${id}:`,
      CACHE_TTL: '60s',
      HEALTH_TIMEOUT: '500ms',
    });
    http = request(app.getHttpServer());
    code = (await http.post('/urls').send({ url: target }).expect(201)).body.code;
  });

  afterAll(async () => {
    if (app) {
      await repositoryOf(app).dropTable();
      await app.close();
    }
    await server?.destroy();
    sqlite.remove();
  });

  it('keeps redirecting from the database, reports Redis down, and caches again once it is back', async () => {
    // Cached while Redis is up: 5 redirects, one lookup.
    let before = await dbLookups(app);
    for (let i = 0; i < 5; i++) await http.get(`/${code}`).expect(302);
    expect((await dbLookups(app)) - before).toBe(1);
    await http.get('/health').expect(200);

    await server.stop();

    // Every redirect still answers 302, each well within a second (no per-request connect
    // timeout: the store fails fast while the connection is down). The app had this code's URL
    // within its TTL: it answers from memory, without a database lookup.
    before = await dbLookups(app);
    const slowest = { ms: 0 };
    for (let i = 0; i < 20; i++) {
      const started = Date.now();
      const res = await http.get(`/${code}`).expect(302);
      slowest.ms = Math.max(slowest.ms, Date.now() - started);
      expect(res.headers.location).toBe(target);
    }
    expect((await dbLookups(app)) - before).toBe(0);
    expect(slowest.ms).toBeLessThan(1500);
    await http.get('/nosuchcode').expect(404);
    const created = await http
      .post('/urls')
      .send({ url: `${target}/2` })
      .expect(201);
    // A code created during the outage: looked up in the database once, then held.
    before = await dbLookups(app);
    for (let i = 0; i < 5; i++) await http.get(`/${created.body.code}`).expect(302);
    expect((await dbLookups(app)) - before).toBe(1);

    // Still ready: Redis is a cache. /health says the app is degraded and why.
    await http.get('/health/ready').expect(200);
    const down = await http.get('/health').expect(200);
    expect(down.body.status).toBe('degraded');
    expect(down.body.details.redis.status).toBe('degraded');
    expect(down.body.details.database.status).toBe('up');

    await server.start();

    // ioredis reconnects on its own; health turns ok again.
    const recovered = await waitFor(
      async () => (await http.get('/health')).body.status === 'ok',
      15_000,
    );
    expect(recovered).toBe(true);

    // Caching resumed: redirects stop reaching the database. The restarted Redis lost the
    // versions of the tags every value is stamped with (the prefix's, see clear()); a redirect
    // answered while the connections were still coming back may have left no value, so allow a
    // few rounds.
    const cachedAgain = await waitFor(async () => {
      await http.get(`/${code}`).expect(302);
      const start = await dbLookups(app);
      for (let i = 0; i < 10; i++) await http.get(`/${code}`).expect(302);
      return (await dbLookups(app)) - start === 0;
    }, 15_000);
    expect(cachedAgain).toBe(true);
    const probe = new Redis(server.url);
    try {
      expect(await probe.exists(urlKeyOf(app, `test:shortener:${id}:`, code))).toBe(1);
    } finally {
      await probe.quit();
    }
  });
});
