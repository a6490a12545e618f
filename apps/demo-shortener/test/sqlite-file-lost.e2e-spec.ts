import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Redis } from 'ioredis';
import { rmSync } from 'node:fs';
import request from 'supertest';
import { deleteKeys, REDIS_URL, runId, startApp, tempSqlite } from './support/env';

/** Deletes the SQLite file of `url` and its WAL files, as an operator or a cleanup job would. */
function deleteFile(url: string): void {
  const file = url.slice('sqlite:'.length);
  for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
}

/**
 * The SQLite file deleted while the app runs: the app notices (health down, writes refused
 * with 503) instead of handing out codes from a file nobody will see again; and a database
 * created anew at the same path, whose codes start again at 1, never serves a cached entry of
 * the old one (cache keys carry the database's random identity).
 */
describe('shortener: SQLite file deleted while running', () => {
  const id = runId('filelost');
  const prefix = `test:shortener:${id}:`;
  const sqlite = tempSqlite(id);
  const env = {
    DATABASE_URL: sqlite.url,
    DATABASE_TABLE: `filelost_${id}`,
    REDIS_KEY_PREFIX: prefix,
    CACHE_TTL: '10m',
  };
  const apps: NestFastifyApplication[] = [];
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    for (const app of apps) await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
    sqlite.remove();
  });

  async function start(): Promise<ReturnType<typeof request>> {
    const app = await startApp(env);
    apps.push(app);
    return request(app.getHttpServer());
  }

  it('reports the database down and refuses writes with 503 once the file is gone', async () => {
    const http = await start();
    await http.post('/urls').send({ url: 'https://example.com/before' }).expect(201);
    await http.get('/health').expect(200);

    deleteFile(sqlite.url);

    const health = await http.get('/health').expect(503);
    expect(health.body.details.database).toEqual({
      status: 'down',
      database: 'sqlite',
      message: expect.stringMatching(/deleted or replaced/),
    });
    const write = await http.post('/urls').send({ url: 'https://example.com/after' }).expect(503);
    expect(write.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: expect.stringMatching(/^Database unavailable/),
    });
    await apps.pop()!.close();
  });

  it('after a restart on a new file, a code handed out again redirects to its new URL, not to the cached old one', async () => {
    deleteFile(sqlite.url);
    const first = await start();
    const old = await first.post('/urls').send({ url: 'https://example.com/old' }).expect(201);
    // Cached in Redis for 10 minutes.
    expect((await first.get(`/${old.body.code}`).expect(302)).headers.location).toBe(
      'https://example.com/old',
    );
    await apps.pop()!.close();

    // The file is lost; the app starts on a new, empty one: codes start again at 1.
    deleteFile(sqlite.url);
    const second = await start();
    const fresh = await second.post('/urls').send({ url: 'https://example.com/new' }).expect(201);
    expect(fresh.body.code).toBe(old.body.code);
    for (let i = 0; i < 3; i++) {
      const res = await second.get(`/${fresh.body.code}`).expect(302);
      expect(res.headers.location).toBe('https://example.com/new');
    }
    expect((await second.get(`/urls/${fresh.body.code}`).expect(200)).body.url).toBe(
      'https://example.com/new',
    );
  });
});
