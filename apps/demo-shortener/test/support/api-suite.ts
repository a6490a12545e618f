import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Redis } from 'ioredis';
import request from 'supertest';
import { decodeBase62, encodeBase62 } from '../../src/codes/base62';
import { urlHash } from '../../src/codes/code-strategy';
import { createUrlRepository } from '../../src/db/repository.factory';
import type { ShortenerEnv } from '../../src/config';
import {
  closeAndDrop,
  dbLookups,
  deleteKeys,
  PUBLIC_BASE_URL,
  REDIS_URL,
  repositoryOf,
  runId,
  startApp,
} from './env';

const BASE62 = /^[0-9a-zA-Z]{1,11}$/;

/**
 * The HTTP contract of the shortener, run against one database: create, redirect, JSON
 * record, the same URL twice, negative caching, and every bad input.
 * `database()` gives the DATABASE_URL (and a clean-up) for this run.
 */
export function describeShortenerApi(
  label: string,
  database: () => Promise<{ url: string; cleanup?: () => void | Promise<void> }>,
): void {
  describe(`shortener HTTP API on ${label}`, () => {
    const id = runId('api');
    const prefix = `test:shortener:${id}:`;
    let app: NestFastifyApplication;
    let http: ReturnType<typeof request>;
    let redis: Redis;
    let cleanup: (() => void | Promise<void>) | undefined;
    let databaseUrl: string;

    beforeAll(async () => {
      const db = await database();
      cleanup = db.cleanup;
      databaseUrl = db.url;
      const config: ShortenerEnv = {
        DATABASE_URL: db.url,
        DATABASE_TABLE: `e2e_${id}`,
        REDIS_KEY_PREFIX: prefix,
        BODY_LIMIT: '4096',
      };
      app = await startApp(config);
      http = request(app.getHttpServer());
      redis = new Redis(REDIS_URL);
    });

    afterAll(async () => {
      await closeAndDrop(app);
      if (redis) {
        await deleteKeys(redis, prefix);
        await redis.quit();
      }
      await cleanup?.();
    });

    const post = (body: unknown) =>
      http.post('/urls').set('Content-Type', 'application/json').send(JSON.stringify(body));

    it('creates a Base62 code (201 { code, shortUrl, url }) that redirects with 302 and reads back as JSON', async () => {
      const target = 'https://example.com/articles/42?ref=e2e#top';
      const created = await post({ url: target }).expect(201);
      expect(created.body).toEqual({
        code: expect.stringMatching(BASE62),
        shortUrl: `${PUBLIC_BASE_URL}/${created.body.code}`,
        url: target,
        createdAt: expect.any(String),
      });
      const redirect = await http.get(`/${created.body.code}`).expect(302);
      expect(redirect.headers.location).toBe(target);
      const record = await http.get(`/urls/${created.body.code}`).expect(200);
      expect(record.body).toEqual(created.body);
      expect(await repositoryOf(app).findByCode(created.body.code)).toEqual({
        code: created.body.code,
        url: target,
        createdAt: created.body.createdAt,
      });
    });

    it('gives the same URL the same code (200 the second time) and other URLs other codes', async () => {
      const first = await post({ url: 'https://example.com/same' }).expect(201);
      const again = await post({ url: 'https://example.com/same' }).expect(200);
      // WHATWG normalization: scheme and host case do not make a new URL.
      const normalized = await post({ url: 'HTTPS://EXAMPLE.com/same' }).expect(200);
      const other = await post({ url: 'https://example.com/other' }).expect(201);
      expect(again.body).toEqual(first.body);
      expect(normalized.body.code).toBe(first.body.code);
      expect(other.body.code).not.toBe(first.body.code);
    });

    it('serves a hot code from the cache: 20 redirects, one database lookup', async () => {
      const { body } = await post({ url: 'https://example.com/hot' }).expect(201);
      const before = await dbLookups(app);
      for (let i = 0; i < 20; i++) {
        const res = await http.get(`/${body.code}`).expect(302);
        expect(res.headers.location).toBe('https://example.com/hot');
      }
      expect((await dbLookups(app)) - before).toBe(1);
    });

    it('answers an unknown code with a JSON 404 and caches the miss (10 requests, one lookup)', async () => {
      const before = await dbLookups(app);
      for (let i = 0; i < 10; i++) {
        const res = await http.get('/zzzzzz9').expect(404);
        expect(res.body).toEqual({
          statusCode: 404,
          error: 'Not Found',
          message: 'No short URL with code "zzzzzz9"',
        });
      }
      await http.get('/urls/zzzzzz9').expect(404);
      expect((await dbLookups(app)) - before).toBe(1);
    });

    it('redirects a code that was probed (and cached as a miss) before it was created', async () => {
      // With sequence codes the next code is guessable: probe it, then create it.
      const { body: latest } = await post({ url: 'https://example.com/probe-base' }).expect(201);
      const next = encodeBase62(decodeBase62(latest.code) + 1n);
      await http.get(`/${next}`).expect(404);
      const { body } = await post({ url: 'https://example.com/probed' }).expect(201);
      expect(body.code).toBe(next);
      const res = await http.get(`/${next}`).expect(302);
      expect(res.headers.location).toBe('https://example.com/probed');
    });

    describe('refuses bad input with a 400 JSON error and stores nothing', () => {
      const cases: [string, unknown, RegExp][] = [
        ['a body without url', { link: 'https://example.com' }, /no "url"/],
        ['an empty url', { url: '' }, /no "url"/],
        ['a url that is not a string', { url: 42 }, /must be a string/],
        ['a relative URL', { url: '/just/a/path' }, /absolute http or https URL/],
        ['a URL without scheme', { url: 'example.com/page' }, /absolute http or https URL/],
        ['an ftp URL', { url: 'ftp://example.com/file' }, /http or https, not ftp/],
        ['a javascript: URL', { url: 'javascript:alert(1)' }, /http or https, not javascript/],
        [
          'a URL longer than 2048 characters',
          { url: `https://example.com/${'a'.repeat(2040)}` },
          /2048/,
        ],
        [
          'credentials in the URL',
          { url: 'https://user:secret@example.com/' },
          /user name or password/,
        ],
        ['a user name alone', { url: 'https://user@example.com/' }, /user name or password/],
        [
          'a URL pointing back at the shortener',
          { url: `${PUBLIC_BASE_URL}/abc` },
          /points at this shortener/,
        ],
        ['a JSON array', ['https://example.com'], /JSON object/],
        ['a JSON string', 'https://example.com', /JSON object/],
      ];
      it.each(cases)('%s', async (_name, body, message) => {
        const res = await post(body).expect(400);
        expect(res.body).toEqual({
          statusCode: 400,
          error: 'Bad Request',
          message: expect.stringMatching(message),
        });
        const url = (body as { url?: unknown })?.url;
        if (typeof url === 'string' && url) {
          let normalized = url;
          try {
            normalized = new URL(url).href;
          } catch {
            // not a URL: nothing could have been stored under it
          }
          expect(await repositoryOf(app).findByUrlHash(urlHash(normalized))).toBeNull();
        }
      });

      it('malformed JSON', async () => {
        const res = await http
          .post('/urls')
          .set('Content-Type', 'application/json')
          .send('{"url": "https://example.com"')
          .expect(400);
        expect(res.body.message).toMatch(/not valid JSON/);
      });

      it('a body that is not JSON at all (text/plain) gets 415', async () => {
        const res = await http
          .post('/urls')
          .set('Content-Type', 'text/plain')
          .send('https://example.com')
          .expect(415);
        expect(res.body.message).toMatch(/Content-Type: application\/json/);
      });

      it('no body', async () => {
        const res = await http.post('/urls').expect(400);
        expect(res.body.message).toMatch(/JSON object|not valid JSON/);
      });

      it('a body larger than the limit gets 413', async () => {
        const res = await post({ url: `https://example.com/${'a'.repeat(5000)}` }).expect(413);
        expect(res.body).toEqual({
          statusCode: 413,
          error: 'Payload Too Large',
          message: 'The request body is larger than 4096 bytes',
        });
      });
    });

    it('answers codes that no strategy can produce with 404 without a database lookup', async () => {
      const before = await dbLookups(app);
      for (const bad of ['abc-def', 'abc_def', 'a'.repeat(12), '%C3%A9t%C3%A9', 'a.b', 'urls']) {
        const res = await http.get(`/${bad}`).expect(404);
        expect(res.body.statusCode).toBe(404);
        await http.get(`/urls/${bad}`).expect(404);
      }
      expect(await dbLookups(app)).toBe(before);
    });

    it('reports the database and Redis up on /health', async () => {
      const res = await http.get('/health').expect(200);
      expect(res.body.status).toBe('ok');
      expect(res.body.details.database.status).toBe('up');
      expect(res.body.details.redis.status).toBe('up');
    });

    it('exports the lookup counter and the stampede library metrics of resolve on /metrics', async () => {
      const res = await http.get('/metrics').expect(200);
      expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
      const lookups = [...res.text.matchAll(/^shortener_db_lookups_total\{[^}]*\} (\d+)$/gm)];
      expect(lookups.reduce((s, m) => s + Number(m[1]), 0)).toBe(await dbLookups(app));
      // From the library, through OpenTelemetry (the app's own shortener_stampede_* are gone).
      const resolve = 'stampede_method="UrlResolver.resolve"';
      const calls = new RegExp(`^stampede_calls_total\\{${resolve},[^}]*\\} (\\d+)$`, 'm').exec(
        res.text,
      );
      expect(Number(calls?.[1])).toBeGreaterThan(20);
      expect(res.text).toMatch(new RegExp(`^stampede_hits_total\\{${resolve},[^}]*\\} \\d+$`, 'm'));
      expect(res.text).toMatch(/^target_info\{service_name="demo-shortener"/m);
      expect(res.text).not.toMatch(/^shortener_stampede_/m);
    });

    it('exports the default process metrics and durations in seconds, never in ms', async () => {
      const { text } = await http.get('/metrics').expect(200);
      for (const name of [
        'process_cpu_user_seconds_total',
        'process_resident_memory_bytes',
        'nodejs_eventloop_lag_seconds',
        'nodejs_heap_size_used_bytes',
      ]) {
        expect(text).toMatch(new RegExp(`^${name}( |\\{)`, 'm'));
      }
      // Every request, by route and status.
      expect(text).toMatch(
        /^shortener_http_request_duration_seconds_count\{method="GET",route="\/:code",status_code="302"\} [1-9]\d*$/m,
      );
      expect(text).toMatch(
        /^shortener_http_request_duration_seconds_bucket\{le="0\.005",method="POST",route="\/urls",status_code="201"\} \d+$/m,
      );
      // Every database call, by operation and outcome.
      expect(text).toMatch(
        /^shortener_db_query_duration_seconds_count\{operation="find_by_code",outcome="ok"\} [1-9]\d*$/m,
      );
      expect(text).not.toMatch(/_ms(_total|_bucket|_sum|_count)?[{ ]/);
      expect(text).not.toMatch(/^\w+_ms_total[{ ]/m);
      expect(text).toMatch(/^process_cpu_seconds_total /m);
      // The app's registry and the OpenTelemetry exporter: no metric family twice.
      const families = [...text.matchAll(/^# TYPE (\w+) /gm)].map((m) => m[1]);
      expect(families.filter((name, i) => families.indexOf(name) !== i)).toEqual([]);
    });

    it('lists the last links created on GET /_/recent, newest first, with their redirect counts', async () => {
      const urls = [1, 2, 3].map((n) => `https://example.com/recent/${id}/${n}`);
      const codes: string[] = [];
      for (const url of urls) codes.push((await post({ url }).expect(201)).body.code);
      for (let i = 0; i < 2; i++) await http.get(`/${codes[1]}`).expect(302);
      const res = await http.get('/_/recent').expect(200);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.body.counts).toBe('up');
      expect(res.body.links.length).toBeLessThanOrEqual(10);
      expect(res.body.links.slice(0, 3)).toEqual(
        [2, 1, 0].map((i) => ({
          code: codes[i],
          shortUrl: `${PUBLIC_BASE_URL}/${codes[i]}`,
          url: urls[i],
          createdAt: expect.any(String),
          redirects: i === 1 ? 2 : 0,
        })),
      );
      expect(await repositoryOf(app).recent(2)).toEqual(
        [2, 1].map((i) => ({ code: codes[i], url: urls[i], createdAt: expect.any(String) })),
      );
    });

    it('gives a database one identity, shared by every instance, and a new one when its tables are made anew', async () => {
      const database = {
        url: databaseUrl,
        table: `e2e_id_${id}`,
        poolSize: 2,
        statementTimeoutMs: 5000,
        connectTimeoutMs: 5000,
      };
      const a = createUrlRepository(database);
      const b = createUrlRepository(database);
      try {
        await a.init();
        await b.init();
        expect(a.databaseId).toMatch(/^[0-9a-f]{12}$/);
        expect(b.databaseId).toBe(a.databaseId);
        await a.dropTable();
        await a.init();
        expect(a.databaseId).not.toBe(b.databaseId);
      } finally {
        await a.dropTable();
        await a.close();
        await b.close();
      }
    });
  });
}
