import { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import { ThrowawayRedis } from '../../../support/throwaway-redis';
import { repositoryOf, runId, startApp, tempSqlite, waitFor } from './support/env';

/**
 * /health/live (the process answers), /health/ready (the app can serve: the database answers;
 * Redis is only a cache, so without it the app is degraded, not down) and /health (the same
 * verdict, with every dependency's details).
 */
describe('shortener: health endpoints', () => {
  const id = runId('health');
  const sqlite = tempSqlite(id);
  let redis: ThrowawayRedis;
  let app: NestFastifyApplication;
  let http: ReturnType<typeof request>;

  beforeAll(async () => {
    redis = await ThrowawayRedis.start();
    app = await startApp({
      DATABASE_URL: sqlite.url,
      DATABASE_TABLE: `health_${id}`,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `test:shortener:${id}:`,
      HEALTH_TIMEOUT: '500ms',
    });
    http = request(app.getHttpServer());
  });

  afterAll(async () => {
    await app?.close();
    await redis?.destroy();
    sqlite.remove();
  });

  it('all up: 200 everywhere, status ok', async () => {
    expect((await http.get('/health/live').expect(200)).body).toEqual({ status: 'ok' });
    for (const path of ['/health/ready', '/health']) {
      const res = await http.get(path).expect(200);
      expect(res.body).toEqual({
        status: 'ok',
        details: {
          database: { status: 'up', database: 'sqlite', latencyMs: expect.any(Number) },
          redis: { status: 'up', store: 'redis', latencyMs: expect.any(Number) },
        },
      });
    }
  });

  it('Redis down: still ready (200), reported degraded, and up again once Redis is back', async () => {
    await redis.stop();
    await http.get('/health/live').expect(200);
    for (const path of ['/health/ready', '/health']) {
      const res = await http.get(path).expect(200);
      expect(res.body).toEqual({
        status: 'degraded',
        details: {
          database: { status: 'up', database: 'sqlite', latencyMs: expect.any(Number) },
          redis: { status: 'degraded', store: 'redis', message: expect.any(String) },
        },
      });
    }
    await redis.start();
    expect(
      await waitFor(async () => (await http.get('/health')).body.status === 'ok', 15_000),
    ).toBe(true);
  }, 30_000);

  it('database down: not ready (503), still live', async () => {
    await repositoryOf(app).close();
    await http.get('/health/live').expect(200);
    for (const path of ['/health/ready', '/health']) {
      const res = await http.get(path).expect(503);
      expect(res.body).toEqual({
        status: 'error',
        details: {
          database: { status: 'down', database: 'sqlite', message: expect.any(String) },
          redis: { status: 'up', store: 'redis', latencyMs: expect.any(Number) },
        },
      });
    }
  });
});

describe('shortener: health with the cache off', () => {
  const id = runId('healthnocache');
  const sqlite = tempSqlite(id);
  let app: NestFastifyApplication;

  beforeAll(async () => {
    app = await startApp({
      DATABASE_URL: sqlite.url,
      DATABASE_TABLE: `health_${id}`,
      CACHE_ENABLED: 'false',
    });
  });

  afterAll(async () => {
    await app?.close();
    sqlite.remove();
  });

  it('checks the database only', async () => {
    const res = await request(app.getHttpServer()).get('/health').expect(200);
    expect(res.body).toEqual({
      status: 'ok',
      details: { database: { status: 'up', database: 'sqlite', latencyMs: expect.any(Number) } },
    });
  });
});
