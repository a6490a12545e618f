import { createServer, Server } from 'node:http';
import { createServer as createNetServer, Server as NetServer, Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Redis } from 'ioredis';
import type { Page, Response } from 'playwright-core';
import { launchBrowser, screenshotPath, TestBrowser } from '../../../test/support/browser';
import { freePort } from '../../../support/throwaway-redis';
import { urlHash } from '../src/codes/code-strategy';
import {
  closeAndDrop,
  deleteKeys,
  REDIS_URL,
  repositoryOf,
  runId,
  startApp,
  tempSqlite,
  waitFor,
} from './support/env';
import { concurrentGets, listen } from './support/http';

/** Generous: the tests share a small, busy machine. Nothing here asserts timing. */
const WAIT_MS = 20_000;
const WAIT = { timeout: WAIT_MS };
jest.setTimeout(60_000);

/** The number shown in one of the live panel's counters. */
async function panelValue(page: Page, name: string): Promise<number> {
  const text = (await page.locator(`#stat-${name}`).textContent()) ?? '';
  return Number(text.replace(/[^0-9]/g, '') || 'NaN');
}

/** Waits until the live panel's counter `name` shows at least `min` (it refreshes every second). */
async function waitForPanel(page: Page, name: string, min: number): Promise<void> {
  const reached = await waitFor(async () => (await panelValue(page, name)) >= min, WAIT_MS);
  if (!reached) {
    throw new Error(
      `the panel's ${name} shows ${await panelValue(page, name)}, expected >= ${min}`,
    );
  }
}

/** Waits until the recent list's row of `shortUrl` shows `count` redirects. */
async function waitForCount(page: Page, shortUrl: string, count: string): Promise<void> {
  const cells = () => page.locator('#recent tr').filter({ hasText: shortUrl }).locator('td');
  const reached = await waitFor(
    async () =>
      (await cells().first().textContent()) === shortUrl &&
      (await cells().nth(2).textContent()) === count,
    WAIT_MS,
  );
  if (!reached) throw new Error(`the recent list does not show ${count} redirects of ${shortUrl}`);
}

/**
 * The page at `/` in a real headless Chromium, against the app on SQLite and Redis: shortening
 * through the form, the copy button, following a link, the recent list and the live panel, the
 * server's validation message, stored markup rendered as text, and the security headers.
 */
describe('shortener page in Chromium', () => {
  const id = runId('page');
  const prefix = `test:shortener:${id}:`;
  const sqlite = tempSqlite(id);
  const hits: string[] = [];
  const consoleErrors: string[] = [];
  /** Every answer the page got (`status url`), and the loads the browser logged as failed. */
  const responses: string[] = [];
  const failedLoads: string[] = [];
  let app: NestFastifyApplication;
  let base: string;
  let target: Server;
  let targetBase: string;
  let browser: TestBrowser;
  let page: Page;
  let redis: Redis;
  let firstLink: { code: string; shortUrl: string; url: string };

  beforeAll(async () => {
    // A port known before the app starts, so that PUBLIC_BASE_URL (the short links) is the app.
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = await startApp({
      DATABASE_URL: sqlite.url,
      DATABASE_TABLE: `page_${id}`,
      REDIS_KEY_PREFIX: prefix,
      PORT: String(port),
      PUBLIC_BASE_URL: base,
    });
    await app.listen(port, '127.0.0.1');
    // Where the short links lead: a second local server that records every visit.
    target = createServer((req, res) => {
      hits.push(req.url ?? '');
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>target</title><p>arrived</p>');
    });
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    targetBase = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
    redis = new Redis(REDIS_URL);
    browser = await launchBrowser();
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], {
      origin: base,
    });
    page = await browser.context.newPage();
    page.on('response', (r) => responses.push(`${r.status()} ${r.url()}`));
    page.on('console', (msg) => {
      // Script errors and CSP violations; answers such as the 400 under test are logged too.
      if (msg.type() !== 'error') return;
      if (/^Failed to load resource/.test(msg.text()))
        failedLoads.push(`${msg.text()} ${msg.location().url}`);
      else consoleErrors.push(msg.text());
    });
    page.on('pageerror', (err) => consoleErrors.push(err.message));
  });

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => (target ? target.close(resolve) : resolve(undefined)));
    await closeAndDrop(app);
    if (redis) {
      await deleteKeys(redis, prefix);
      await redis.quit();
    }
    sqlite.remove();
  });

  it('serves / with a strict Content-Security-Policy, its script and style as files', async () => {
    const response = (await page.goto(`${base}/`)) as Response;
    expect(response.status()).toBe(200);
    const headers = response.headers();
    const csp = headers['content-security-policy'];
    for (const directive of [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      "object-src 'none'",
      "base-uri 'none'",
      "frame-ancestors 'none'",
      "form-action 'self'",
    ]) {
      expect(csp).toContain(directive);
    }
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(headers['x-content-type-options']).toBe('nosniff');
    const html = await response.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
    expect(html).not.toMatch(/<style|\sstyle=|\son[a-z]+=/); // no inline style or handlers
    // The script ran (the panel fills in), under that policy.
    await page.locator('#cache-state', { hasText: 'Redis connected' }).waitFor(WAIT);

    // The page's icon is its own file (the policy allows images of this origin only): the
    // browser loads it, and nothing answered 404 or was logged as a failed load (a browser asks
    // for /favicon.ico when a page names no icon). The page is loaded: no wait for its link.
    const iconLink = page.locator('link[rel="icon"]');
    expect(await iconLink.getAttribute('href', { timeout: 1000 })).toBe('/_/favicon.svg');
    const iconLoaded = () => responses.includes(`200 ${base}/_/favicon.svg`);
    if (!(await waitFor(async () => iconLoaded(), WAIT_MS)))
      throw new Error(`the icon was not loaded; the page's answers: ${responses.join(', ')}`);
    expect(responses.filter((r) => r.startsWith('404 '))).toEqual([]);
    expect(failedLoads).toEqual([]);
    expect(consoleErrors).toEqual([]);
    const icon = await fetch(`${base}/_/favicon.svg`);
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    expect(await icon.text()).toMatch(/^<svg /);
    // What a browser asks for when a page names no icon (the JSON endpoints): not a 404, and not
    // taken for a short link.
    expect((await fetch(`${base}/favicon.ico`, { redirect: 'manual' })).status).toBe(204);
  });

  it('shortens a URL through the form (POST /urls as JSON), shows the link and copies it', async () => {
    const url = `${targetBase}/landing?from=page`;
    await page.fill('#url', url);
    const [request, response] = await Promise.all([
      page.waitForRequest((r) => r.method() === 'POST' && new URL(r.url()).pathname === '/urls'),
      page.waitForResponse((r) => new URL(r.url()).pathname === '/urls'),
      page.click('#shorten'),
    ]);
    expect(request.headers()['content-type']).toBe('application/json');
    expect(request.postDataJSON()).toEqual({ url });
    expect(response.status()).toBe(201);
    firstLink = await response.json();
    expect(firstLink.shortUrl).toBe(`${base}/${firstLink.code}`);

    const link = page.locator('#short-link');
    await link.waitFor({ state: 'visible', ...WAIT });
    expect(await link.textContent()).toBe(firstLink.shortUrl);
    expect(await link.getAttribute('href')).toBe(firstLink.shortUrl);
    expect(await page.locator('#result-target').textContent()).toBe(url);

    await page.click('#copy');
    await page.locator('#copied', { hasText: 'Copied' }).waitFor(WAIT);
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(firstLink.shortUrl);

    // The recent list shows it, not yet followed.
    const row = page.locator('#recent tr', { hasText: firstLink.shortUrl });
    await row.waitFor(WAIT);
    expect(await row.locator('td').nth(1).textContent()).toBe(url);
    expect(await row.locator('td').nth(2).textContent()).toBe('0');
  });

  it('following the short link lands on the target; the recent list and the live panel count it', async () => {
    const redirectsBefore = await panelValue(page, 'redirects');
    const hitsBefore = await panelValue(page, 'cacheHits');
    const visitor = await browser.context.newPage();
    for (let i = 0; i < 3; i++) {
      await visitor.goto(firstLink.shortUrl);
      expect(visitor.url()).toBe(firstLink.url);
      expect(await visitor.locator('p').textContent()).toBe('arrived');
    }
    await visitor.close();
    expect(hits.filter((h) => h === '/landing?from=page')).toHaveLength(3);

    // The first visit read the database, the next two the cache; the page polls every second.
    await waitForCount(page, firstLink.shortUrl, '3');
    await waitForPanel(page, 'redirects', redirectsBefore + 3);
    await waitForPanel(page, 'cacheHits', hitsBefore + 2);
    expect(await panelValue(page, 'dbLookups')).toBeGreaterThanOrEqual(1);
  });

  it("shows the server's validation message under the input, as text", async () => {
    const api = await fetch(`${base}/urls`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ url: 'javascript:alert(1)' }),
    });
    expect(api.status).toBe(400);
    const { message } = (await api.json()) as { message: string };

    await page.fill('#url', 'javascript:alert(1)');
    await page.click('#shorten');
    const error = page.locator('#url-error');
    await error.waitFor({ state: 'visible', ...WAIT });
    expect(await error.textContent()).toBe(message);
    expect(message).toMatch(/http or https/);
    expect(await page.locator('#url').getAttribute('aria-invalid')).toBe('true');

    // Typing again clears it.
    await page.fill('#url', 'https://example.com/');
    expect(await error.isHidden()).toBe(true);
  });

  it('looks alive: a few links, redirects and a burst on a new link (screenshot)', async () => {
    const urls = [
      'https://example.com/articles/42',
      'https://docs.nestjs.com/techniques/caching',
      'https://redis.io/docs/latest/develop/use/patterns/distributed-locks/',
    ];
    const codes: string[] = [];
    for (const url of urls) {
      const [response] = await Promise.all([
        page.waitForResponse((r) => new URL(r.url()).pathname === '/urls'),
        page.fill('#url', url).then(() => page.click('#shorten')),
      ]);
      codes.push(((await response.json()) as { code: string }).code);
    }
    const joinsBefore = await panelValue(page, 'joins');
    // 40 at once on a link never followed: one database lookup, the others join it.
    const burst = await concurrentGets(`${base}/${codes[0]}`, 40);
    expect(burst.every((a) => a.status === 302)).toBe(true);
    for (let i = 0; i < 5; i++) await concurrentGets(`${base}/${codes[1]}`, 1);
    await waitForPanel(page, 'redirects', 48);
    await waitForPanel(page, 'joins', joinsBefore + 1);
    await waitForCount(page, `${base}/${codes[0]}`, '40');
    await waitForCount(page, `${base}/${codes[1]}`, '5');
    await waitForCount(page, `${base}/${codes[2]}`, '0');
    await page.screenshot({ path: screenshotPath('shortener-page.png') });
  });

  it('renders stored URLs as text: markup in a URL never becomes HTML', async () => {
    // Through the form: the server normalizes the URL (percent-encodes < and >).
    const typed = 'https://example.com/?q=<img src=x onerror=window.__pwned=1>';
    await page.fill('#url', typed);
    await page.click('#shorten');
    await page.locator('#result-target', { hasText: 'example.com/?q=' }).waitFor(WAIT);
    expect(await page.locator('#result-target').textContent()).toBe(new URL(typed).href);

    // Straight into the database, as another client could have stored it: the page must not
    // rely on the server's normalization.
    const raw = [
      'https://example.com/?q=<img src=x onerror=window.__pwned=1>',
      'https://example.com/<b>x</b>',
    ];
    const repo = repositoryOf(app);
    await repo.insertWithCode('zMarkupImg', raw[0], urlHash(raw[0]));
    await repo.insertWithCode('zMarkupBold', raw[1], urlHash(raw[1]));

    await page.reload();
    for (const url of raw) {
      await page.locator('#recent td.target', { hasText: url }).waitFor(WAIT);
    }
    const targets = await page.locator('#recent td.target').allTextContents();
    expect(targets).toEqual(expect.arrayContaining(raw));
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('#recent b').count()).toBe(0);
    expect(await page.evaluate('typeof window.__pwned')).toBe('undefined');
    expect(consoleErrors).toEqual([]);
  });
});

describe('shortener page in Chromium, Redis down', () => {
  const id = runId('page_noredis');
  const sqlite = tempSqlite(id);
  let app: NestFastifyApplication;
  let base: string;
  let browser: TestBrowser;
  let deadRedis: NetServer;
  const deadSockets = new Set<Socket>();

  beforeAll(async () => {
    // A "Redis" that accepts connections and never answers: the app starts without its cache.
    // (Rather than a closed port: ioredis 6 then holds the process ~2 s after disconnect(),
    // its disconnectTimeout waiting for a socket that is already gone.)
    deadRedis = createNetServer((socket) => {
      deadSockets.add(socket);
      socket.on('close', () => deadSockets.delete(socket));
    });
    await new Promise<void>((resolve) => deadRedis.listen(0, '127.0.0.1', resolve));
    app = await startApp({
      DATABASE_URL: sqlite.url,
      DATABASE_TABLE: `page_${id}`,
      REDIS_URL: `redis://127.0.0.1:${(deadRedis.address() as AddressInfo).port}`,
      REDIS_KEY_PREFIX: `test:shortener:${id}:`,
      REDIS_CONNECT_TIMEOUT: '300ms',
    });
    base = await listen(app);
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await closeAndDrop(app);
    for (const socket of deadSockets) socket.destroy();
    await new Promise((resolve) => deadRedis?.close(resolve));
    sqlite.remove();
  });

  it('still loads, says Redis is down, and lists links without counts', async () => {
    const created = await fetch(`${base}/urls`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ url: 'https://example.com/without-redis' }),
    });
    expect(created.status).toBe(201);
    const { code } = (await created.json()) as { code: string };
    const redirect = await fetch(`${base}/${code}`, { redirect: 'manual' });
    expect(redirect.status).toBe(302);

    const page = await browser.context.newPage();
    expect((await page.goto(`${base}/`))?.status()).toBe(200);
    await page.locator('#cache-state', { hasText: 'Redis is down' }).waitFor(WAIT);
    await page.locator('#recent-note', { hasText: 'redirect counts are paused' }).waitFor(WAIT);
    const cells = page.locator('#recent tr').first().locator('td');
    expect(await cells.nth(1).textContent()).toBe('https://example.com/without-redis');
    expect(await cells.nth(2).textContent()).toBe('–');
    await waitForPanel(page, 'redirects', 1);
    await page.close();
  });
});
