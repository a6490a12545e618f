import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { connect } from 'node:net';
import { closeAndDrop, dbLookups, repositoryOf, runId, startApp, tempSqlite } from './support/env';
import { listen } from './support/http';

/** Sends `raw` on a new TCP connection; resolves with everything the server wrote until it closed. */
function rawRequest(base: string, raw: string): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(raw));
    let received = '';
    socket.on('data', (d) => (received += d.toString()));
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
  });
}

const bodyOf = (response: string) => JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4));

/**
 * Errors answered by the framework (Fastify, Node's HTTP parser) before any handler runs use the
 * app's JSON error shape `{ statusCode, error, message }` too, and paths that cannot be codes
 * are 404 whatever their length.
 */
describe('shortener: framework-level errors', () => {
  const id = runId('errors');
  const sqlite = tempSqlite(id);
  let app: NestFastifyApplication;
  let base: string;

  beforeAll(async () => {
    app = await startApp({
      DATABASE_URL: sqlite.url,
      DATABASE_TABLE: `errors_${id}`,
      CACHE_ENABLED: 'false',
    });
    base = await listen(app);
  });

  afterAll(async () => {
    await closeAndDrop(app);
    sqlite.remove();
  });

  it.each([500, 2000])(
    'answers a %i-character code path with a JSON 404, without a database lookup',
    async (length) => {
      const before = await dbLookups(app);
      for (const path of [`/${'a'.repeat(length)}`, `/urls/${'a'.repeat(length)}`]) {
        const res = await fetch(`${base}${path}`, { redirect: 'manual' });
        expect(res.status).toBe(404);
        expect(await res.json()).toEqual({
          statusCode: 404,
          error: 'Not Found',
          message: expect.stringMatching(/^No short URL with code "a{32}"$/),
        });
      }
      expect(await dbLookups(app)).toBe(before);
    },
  );

  it('answers a malformed %-encoding in the path with a JSON 400', async () => {
    const res = await fetch(`${base}/%E0%A4%A`, { redirect: 'manual' });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      statusCode: 400,
      error: 'Bad Request',
      message: expect.stringMatching(/URL/),
    });
  });

  it('answers a request that is not HTTP with a JSON 400 and closes the connection', async () => {
    const response = await rawRequest(base, 'GARBAGE\r\n\r\n');
    expect(response).toMatch(/^HTTP\/1\.1 400 /);
    expect(bodyOf(response)).toEqual({
      statusCode: 400,
      error: 'Bad Request',
      message: expect.any(String),
    });
  });

  it('answers headers larger than Node allows with a JSON 431', async () => {
    const response = await rawRequest(
      base,
      `GET /abc HTTP/1.1\r\nHost: x\r\nX-Big: ${'x'.repeat(20_000)}\r\n\r\n`,
    );
    expect(response).toMatch(/^HTTP\/1\.1 431 /);
    expect(bodyOf(response)).toEqual({
      statusCode: 431,
      error: 'Request Header Fields Too Large',
      message: expect.any(String),
    });
  });

  it('answers a body larger than BODY_LIMIT with a JSON 413', async () => {
    const res = await fetch(`${base}/urls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: `https://example.com/${'a'.repeat(20_000)}` }),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({
      statusCode: 413,
      error: 'Payload Too Large',
      message: 'The request body is larger than 16384 bytes',
    });
  });

  it('answers an unknown route with a JSON 404', async () => {
    const res = await fetch(`${base}/urls/abc/def`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      statusCode: 404,
      error: 'Not Found',
      message: expect.any(String),
    });
  });
});

describe('shortener: a failed database', () => {
  const id = runId('dbfail');
  const sqlite = tempSqlite(id);
  let app: NestFastifyApplication;
  let base: string;

  beforeAll(async () => {
    app = await startApp({
      DATABASE_URL: sqlite.url,
      DATABASE_TABLE: `dbfail_${id}`,
      CACHE_ENABLED: 'false',
    });
    base = await listen(app);
  });

  afterAll(async () => {
    await app?.close();
    sqlite.remove();
  });

  it('answers 503 in the JSON error shape (not a bare 500) when a query fails', async () => {
    const created = await fetch(`${base}/urls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://example.com/db-fails' }),
    });
    const { code } = (await created.json()) as { code: string };
    // Every query fails from now on.
    await repositoryOf(app).close();
    for (const res of [
      await fetch(`${base}/${code}`, { redirect: 'manual' }),
      await fetch(`${base}/urls/${code}`),
      await fetch(`${base}/urls`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ url: 'https://example.com/db-fails/2' }),
      }),
    ]) {
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        statusCode: 503,
        error: 'Service Unavailable',
        message: expect.stringMatching(/^Database unavailable/),
      });
    }
  });
});
