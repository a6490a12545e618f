import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { hostname } from 'node:os';
import { urlHash } from '../src/codes/code-strategy';
import { closeAndDrop, repositoryOf, runId, startApp, tempSqlite } from './support/env';
import { listen } from './support/http';

/**
 * What POST /urls refuses on top of malformed input: a URL that points at the app itself in
 * any spelling (a redirect loop, or a short link to a short link), and a body that is not
 * JSON (a cross-site HTML form can send text/plain, urlencoded or multipart bodies without a
 * CORS preflight, but not application/json).
 */
describe('shortener: POST /urls guards', () => {
  const id = runId('guards');
  const sqlite = tempSqlite(id);
  let app: NestFastifyApplication;
  let base: string;
  let port: number;

  beforeAll(async () => {
    app = await startApp({
      DATABASE_URL: sqlite.url,
      DATABASE_TABLE: `guards_${id}`,
      CACHE_ENABLED: 'false',
    });
    base = await listen(app);
    port = Number(new URL(base).port);
  });

  afterAll(async () => {
    await closeAndDrop(app);
    sqlite.remove();
  });

  const post = (body: string, contentType?: string) =>
    fetch(`${base}/urls`, {
      method: 'POST',
      headers: contentType ? { 'content-type': contentType } : {},
      body,
    });
  const postUrl = (url: string) => post(JSON.stringify({ url }), 'application/json');

  describe('refuses every spelling of the app itself with 400', () => {
    const spellings = (p: number) => [
      `http://127.0.0.1:${p}/x`,
      `http://127.3.2.1:${p}/x`,
      `http://2130706433:${p}/x`,
      `http://[::1]:${p}/x`,
      `http://[::ffff:127.0.0.1]:${p}/x`,
      `http://0.0.0.0:${p}/x`,
      `http://localhost:${p}/x`,
      `http://localhost.:${p}/x`,
      `http://LOCALHOST:${p}/x`,
      `http://${hostname()}:${p}/x`,
      // The public host (PUBLIC_BASE_URL http://sho.rt): any scheme, port, case, trailing dot.
      'http://sho.rt./x',
      'https://SHO.RT:8443/x',
    ];
    it.each(spellings(0).map((_, i) => i))('spelling #%i', async (i) => {
      const url = spellings(port)[i];
      const res = await postUrl(url);
      expect({ url, status: res.status, body: await res.json() }).toEqual({
        url,
        status: 400,
        body: {
          statusCode: 400,
          error: 'Bad Request',
          message: expect.stringMatching(/points at this shortener/),
        },
      });
      expect(await repositoryOf(app).findByUrlHash(urlHash(new URL(url).href))).toBeNull();
    });
  });

  it('accepts other ports of this machine (other services)', async () => {
    const res = await postUrl(`http://127.0.0.1:${port === 65535 ? 1 : port + 1}/other-service`);
    expect(res.status).toBe(201);
  });

  it.each([
    ['text/plain', JSON.stringify({ url: 'https://example.com/plain' })],
    ['text/plain;charset=UTF-8', JSON.stringify({ url: 'https://example.com/plain2' })],
    ['application/x-www-form-urlencoded', 'url=https%3A%2F%2Fexample.com%2Fform'],
    [
      'multipart/form-data; boundary=x',
      '--x\r\nContent-Disposition: form-data; name="url"\r\n\r\nhttps://example.com/multi\r\n--x--\r\n',
    ],
    ['application/xml', '<url>https://example.com/xml</url>'],
  ])('refuses a %s body with 415 and stores nothing', async (contentType, body) => {
    const res = await post(body, contentType);
    expect(res.status).toBe(415);
    expect(await res.json()).toEqual({
      statusCode: 415,
      error: 'Unsupported Media Type',
      message: 'Send the body as JSON with Content-Type: application/json',
    });
    for (const path of ['plain', 'plain2', 'form', 'multi', 'xml']) {
      expect(
        await repositoryOf(app).findByUrlHash(urlHash(`https://example.com/${path}`)),
      ).toBeNull();
    }
  });

  it('accepts application/json with a charset', async () => {
    const res = await post(
      JSON.stringify({ url: 'https://example.com/charset' }),
      'application/json; charset=utf-8',
    );
    expect(res.status).toBe(201);
  });
});
