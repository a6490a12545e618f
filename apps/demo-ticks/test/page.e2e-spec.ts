import * as http from 'node:http';
import { Redis } from 'ioredis';
import type { Page } from 'playwright-core';
import { launchBrowser, screenshotPath, TestBrowser } from '../../../test/support/browser';
import { RandomWalk } from '../src/collector/random-walk';
import { startTicksApp, TicksApp } from '../src/ticks-app.factory';
import {
  deleteKeys,
  FixtureTick,
  publish,
  randomPrefix,
  readDeadLetters,
  REDIS_URL,
  sleep,
  testConfig,
  waitFor,
} from './support/helpers';

/*
 * The ticks page in headless Chromium, against the app started in this process with a real Redis:
 * an hour of synthetic ticks of three symbols (60 one-minute candles each), published the way the
 * collector does, then live ticks while the page is open.
 */
const prefix = randomPrefix('page');
const SYMBOLS = ['SYM001', 'SYM002', 'SYM003'];
/** A tick with this symbol is invalid: the consumer dead-letters it. */
const STREAM_MARKUP = '<img src=x onerror=window.__pwned=1>';
/** Written into the candle store's keys directly, as another program with access to Redis could. */
const REDIS_MARKUP = '<svg onload=window.__pwned=2>';
/** Given to the page in its address. */
const URL_MARKUP = '<img src=x onerror=window.__pwned=3>';
const PAGE_WAIT_MS = 60_000;

jest.setTimeout(180_000);

/** Ticks of SYMBOLS, one every 2 s per symbol over the hour that ended a few seconds ago. */
function hourOfTicks(walk: RandomWalk): FixtureTick[] {
  const end = Date.now() - 5000;
  const ticks: FixtureTick[] = [];
  for (let ts = end - 3_600_000; ts <= end; ts += 2000)
    SYMBOLS.forEach((_, i) => ticks.push(walk.next(i, ts + i)));
  return ticks;
}

describe('the ticks page (headless Chromium)', () => {
  let redis: Redis;
  let ticks: TicksApp;
  let chromium: TestBrowser;
  const walk = new RandomWalk(SYMBOLS.length, 11, 0.004);
  const history = hourOfTicks(walk);

  const api = async (path: string) => (await fetch(`${ticks.url}${path}`)).json() as Promise<any>;
  const candleCount = async (symbol: string, interval: string) =>
    (await api(`/symbols/${symbol}/candles?interval=${interval}&limit=1000`)).candles.length;

  /** Opens the page, recording every request, uncaught error and CSP violation. */
  async function openPage(path = '/') {
    const page = await chromium.context.newPage();
    const requests: string[] = [];
    const errors: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    page.on('pageerror', (err) => errors.push(String(err)));
    await page.addInitScript(() => {
      const w = globalThis as any;
      w.__violations = [];
      w.document.addEventListener('securitypolicyviolation', (e: any) =>
        w.__violations.push(`${e.violatedDirective} ${e.blockedURI}`),
      );
    });
    await page.goto(`${ticks.url}${path}`);
    return { page, requests, errors };
  }

  /** The symbol list as shown: the text of each name and the price it displays. */
  const listed = (page: Page) =>
    page.$$eval('#symbols button.symbol', (buttons: any[]) =>
      buttons.map((b) => ({
        name: b.querySelector('.name').textContent as string,
        price: b.querySelector('.price').dataset.price as string | undefined,
      })),
    );

  const readout = (page: Page) =>
    page.$eval('#readout', (r: any) => ({ ...r.dataset }) as Record<string, string>);

  /** Waits (polling, generously) until `check` holds for what `read` returns. */
  async function waitUntil<T>(what: string, read: () => Promise<T>, check: (v: T) => boolean) {
    let last: T | undefined;
    await waitFor(what, async () => check((last = await read())), PAGE_WAIT_MS, 200).catch(
      (err: Error) => {
        throw new Error(`${err.message}; last seen: ${JSON.stringify(last)}`);
      },
    );
    return last as T;
  }

  /** `promise`, or an error naming `what` if it has not settled after `ms`. */
  async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not return within ${ms} ms`)), ms);
    });
    try {
      return await Promise.race([promise, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ticks = await startTicksApp(testConfig(prefix));
    const stream = ticks.config.consumer.stream;
    await publish(redis, stream, history);
    await publish(redis, stream, [{ symbol: STREAM_MARKUP, price: 1, qty: 1, ts: Date.now() }]);
    await redis.sadd(`${prefix}symbols`, REDIS_MARKUP);
    await redis.hset(`${prefix}last:${REDIS_MARKUP}`, 'p', '1.5', 'ts', String(Date.now()));
    await waitFor(
      'the hour of ticks handled and the invalid one dead-lettered',
      async () =>
        (await ticks.metrics.value('ticks_handled_total')) === history.length &&
        (await ticks.metrics.value('ticks_dead_lettered_total', { reason: 'invalid-tick' })) === 1,
      PAGE_WAIT_MS,
    );
    chromium = await launchBrowser();
  });

  afterAll(async () => {
    await chromium?.close();
    await ticks?.close();
    if (redis) {
      await deleteKeys(redis, prefix);
      await redis.quit();
    }
  });

  it('GET / has a strict Content-Security-Policy; the page files come from the app', async () => {
    const res = await fetch(`${ticks.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    for (const directive of [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      "object-src 'none'",
      "base-uri 'none'",
      "frame-ancestors 'none'",
    ])
      expect(csp).toContain(directive);
    expect(csp).not.toContain('unsafe-inline');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await res.text();
    expect(html).not.toMatch(
      /<script>|<style|\sstyle=|\son[a-z]+=|https?:\/\/(?!www\.tradingview\.com\/")/,
    );

    const charts = await fetch(`${ticks.url}/_/assets/lightweight-charts.js`);
    expect(charts.status).toBe(200);
    expect(charts.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(await charts.text()).toContain('window.LightweightCharts');
    for (const file of ['ticks-page.js', 'ticks-page.css'])
      expect((await fetch(`${ticks.url}/_/assets/${file}`)).status).toBe(200);

    const bad = await fetch(`${ticks.url}/_/events?symbol=${encodeURIComponent(URL_MARKUP)}`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toContain('symbol must be');
  });

  it('lists the symbols with their last price and draws candles of the first one, loading nothing from elsewhere', async () => {
    const { page, requests, errors } = await openPage();
    try {
      const prices = Object.fromEntries(
        await Promise.all(
          SYMBOLS.map(async (s) => [s, String((await api(`/symbols/${s}/price`)).price)]),
        ),
      );
      await waitUntil(
        'the three symbols listed with the prices of the API',
        () => listed(page),
        (rows) => SYMBOLS.every((s) => rows.some((r) => r.name === s && r.price === prices[s])),
      );
      const expected = await candleCount('SYM001', '1m');
      expect(expected).toBeGreaterThanOrEqual(60);
      await waitUntil(
        'the chart of SYM001 with every 1m candle',
        () => readout(page),
        (r) => r.symbol === 'SYM001' && r.interval === '1m' && r.candles === String(expected),
      );
      expect(await page.textContent('#chart-title')).toBe('SYM001 · 1m');
      // The candles are drawn: the chart's canvases have pixels of both candle colours.
      const drawn = await waitUntil(
        'candle colours on the chart canvas',
        () =>
          page.evaluate(() => {
            const colors = [
              [0x26, 0xa6, 0x9a],
              [0xef, 0x53, 0x50],
            ];
            const found = [0, 0];
            for (const canvas of (globalThis as any).document.querySelectorAll('#chart canvas')) {
              if (!canvas.width || !canvas.height) continue;
              const { data } = canvas
                .getContext('2d')
                .getImageData(0, 0, canvas.width, canvas.height);
              for (let i = 0; i < data.length; i += 4)
                colors.forEach(([r, g, b], k) => {
                  if (
                    Math.abs(data[i] - r) < 4 &&
                    Math.abs(data[i + 1] - g) < 4 &&
                    Math.abs(data[i + 2] - b) < 4
                  )
                    found[k]++;
                });
            }
            return found;
          }),
        ([up, down]) => up > 50 && down > 50,
      );
      expect(drawn[0] + drawn[1]).toBeGreaterThan(100);

      const origin = new URL(ticks.url).origin;
      expect(requests.length).toBeGreaterThanOrEqual(4); // page, style, two scripts, events
      expect(requests.filter((url) => new URL(url).origin !== origin)).toEqual([]);
      expect(requests).toEqual(
        expect.arrayContaining([
          `${origin}/_/assets/lightweight-charts.js`,
          `${origin}/_/assets/ticks-page.js`,
          `${origin}/_/assets/ticks-page.css`,
        ]),
      );
      expect(await page.evaluate(() => (globalThis as any).__violations)).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('shows markup in a symbol as text, and never the symbol of a rejected tick', async () => {
    const dead = await readDeadLetters(redis, ticks.config.consumer.deadLetterStream);
    expect(dead).toHaveLength(1);
    expect(dead[0].reason).toBe('invalid-tick');
    expect(JSON.parse(JSON.parse(dead[0].fields).data).symbol).toBe(STREAM_MARKUP);

    const { page, errors } = await openPage(`/?symbol=${encodeURIComponent(URL_MARKUP)}`);
    try {
      const rows = await waitUntil(
        'every symbol listed',
        () => listed(page),
        (r) => r.length === SYMBOLS.length + 1,
      );
      // The symbol written straight into Redis is listed as the characters it is made of.
      expect(rows.map((r) => r.name)).toEqual([...SYMBOLS, REDIS_MARKUP].sort());
      expect(rows.find((r) => r.name === REDIS_MARKUP)?.price).toBe('1.5');
      // The invalid tick's symbol never reached the page.
      expect(rows.some((r) => r.name === STREAM_MARKUP)).toBe(false);
      // The address's symbol is refused, and quoted as text; the first valid symbol is shown.
      expect(await page.textContent('#notice')).toContain(`"${URL_MARKUP}"`);
      await waitUntil(
        'the chart of SYM001',
        () => readout(page),
        (r) => r.symbol === 'SYM001',
      );
      await sleep(500); // an onerror / onload would have run by now
      const elements = await page.evaluate(() => {
        const doc = (globalThis as any).document;
        return {
          images: doc.querySelectorAll('img').length,
          svgs: doc.querySelectorAll('#symbols svg, #notice svg, #readout svg').length,
          pwned: (globalThis as any).__pwned,
        };
      });
      expect(elements).toEqual({ images: 0, svgs: 0, pwned: undefined });
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('switches symbol and interval on click, and shows a new price when a tick arrives', async () => {
    const { page, errors } = await openPage();
    try {
      await page.click('#symbols button[data-symbol="SYM002"]');
      const oneMinute = await candleCount('SYM002', '1m');
      await waitUntil(
        'the chart of SYM002, 1m',
        () => readout(page),
        (r) => r.symbol === 'SYM002' && r.interval === '1m' && r.candles === String(oneMinute),
      );
      await page.click('#intervals button[data-interval="5m"]');
      const fiveMinutes = await candleCount('SYM002', '5m');
      expect(fiveMinutes).toBeLessThan(oneMinute);
      await waitUntil(
        'the chart of SYM002, 5m',
        () => readout(page),
        (r) => r.symbol === 'SYM002' && r.interval === '5m' && r.candles === String(fiveMinutes),
      );
      expect(new URL(page.url()).search).toBe('?symbol=SYM002&interval=5m');

      const shown = (await listed(page)).find((r) => r.name === 'SYM002')!.price;
      const price = 4242.42;
      expect(shown).not.toBe(String(price));
      await publish(redis, ticks.config.consumer.stream, [
        { symbol: 'SYM002', price, qty: 7, ts: Date.now() },
      ]);
      await waitUntil(
        'the new price of SYM002 in the list',
        () => listed(page),
        (rows) => rows.find((r) => r.name === 'SYM002')?.price === String(price),
      );
      expect(await page.textContent('#symbols button[data-symbol="SYM002"] .price')).toBe(
        '4,242.42',
      );
      await waitUntil(
        'the new price as the close of the current 5m candle',
        () => readout(page),
        (r) => r.lastClose === String(price),
      );
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it("shows the consumer's throughput, lag, pending and XACK rate (screenshot)", async () => {
    // The symbol written into Redis by the markup test is gone from this screenshot.
    await redis.srem(`${prefix}symbols`, REDIS_MARKUP);
    await redis.del(`${prefix}last:${REDIS_MARKUP}`);
    const { page, errors } = await openPage('/?symbol=SYM001&interval=1m');
    // Live ticks while the page is open: 3 symbols, every 50 ms.
    let live = true;
    const publishing = (async () => {
      while (live) {
        const now = Date.now();
        await publish(
          redis,
          ticks.config.consumer.stream,
          SYMBOLS.map((_, i) => walk.next(i, now)),
        );
        await sleep(50);
      }
    })();
    try {
      const stat = (page: Page) =>
        page.$$eval('#stats dd[data-stat]', (dds: any[]) =>
          Object.fromEntries(dds.map((dd) => [dd.dataset.stat, dd.dataset.value])),
        ) as Promise<Record<string, string>>;
      const seen = await waitUntil(
        'a handling rate, an XACK rate and ids per XACK',
        () => stat(page),
        (s) => Number(s.ticksPerSec) > 0 && Number(s.xacksPerSec) > 0 && Number(s.idsPerXack) > 0,
      );
      for (const name of ['lag', 'pending', 'ackQueue', 'inFlight', 'handledTotal', 'xackTotal'])
        expect(seen[name]).toMatch(/^\d+$/);
      expect(Number(seen.handledTotal)).toBeGreaterThanOrEqual(history.length);
      expect(await page.textContent('#stats dd[data-stat="ticksPerSec"]')).toMatch(/ticks\/s$/);
      await waitUntil(
        'the chart of SYM001',
        () => readout(page),
        (r) => r.symbol === 'SYM001' && Number(r.candles) >= 60,
      );
      await sleep(1500); // a few live updates on the chart
      await page.screenshot({ path: screenshotPath('ticks-page.png') });
      expect(errors).toEqual([]);
    } finally {
      live = false;
      await publishing;
      await page.close();
    }
  });

  it('ends the open event streams when the app closes', async () => {
    // A keep-alive connection whose response is still open when the server closes stays open
    // until it times out on either side: neither this agent nor, here, the server time it out, so
    // app.close() would not return within the test's timeout unless the streams end first.
    ticks.app.getHttpServer().keepAliveTimeout = 3_600_000;
    const agent = new http.Agent({ keepAlive: true });
    try {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
        http
          .get(`${ticks.url}/_/events?symbol=SYM001&interval=1m`, { agent }, resolve)
          .on('error', reject),
      );
      expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
      res.setEncoding('utf8');
      let received = '';
      res.on('data', (chunk: string) => (received += chunk));
      const ended = new Promise<void>((resolve) => res.on('end', resolve));
      await waitFor('the first stats event', () => /^event: stats$/m.test(received), PAGE_WAIT_MS);
      await within(PAGE_WAIT_MS, 'app.close()', ticks.close());
      await within(5000, 'the end of the event stream', ended);
    } finally {
      agent.destroy();
    }
  });
});
