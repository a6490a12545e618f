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

  /**
   * Opens the page, recording every request, every answer (`status url`), uncaught errors and
   * console errors (a failed load of the icon included), and CSP violations.
   */
  async function openPage(path = '/') {
    const page = await chromium.context.newPage();
    const requests: string[] = [];
    const responses: string[] = [];
    const errors: string[] = [];
    page.on('request', (request) => requests.push(request.url()));
    page.on('response', (response) => responses.push(`${response.status()} ${response.url()}`));
    page.on('pageerror', (err) => errors.push(String(err)));
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(`console: ${message.text()}`);
    });
    await page.addInitScript(() => {
      const w = globalThis as any;
      w.__violations = [];
      w.document.addEventListener('securitypolicyviolation', (e: any) =>
        w.__violations.push(`${e.violatedDirective} ${e.blockedURI}`),
      );
    });
    await page.goto(`${ticks.url}${path}`);
    return { page, requests, responses, errors };
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
    const icon = await fetch(`${ticks.url}/_/assets/favicon.svg`);
    expect(icon.status).toBe(200);
    expect(icon.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    expect(await icon.text()).toMatch(/^<svg /);
    // What a browser asks for when a page names no icon (the JSON endpoints): not a 404.
    const ico = await fetch(`${ticks.url}/favicon.ico`);
    expect(ico.status).toBe(204);

    const bad = await fetch(`${ticks.url}/_/events?symbol=${encodeURIComponent(URL_MARKUP)}`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toContain('symbol must be');
  });

  it('lists the symbols with their last price and draws candles of the first one, loading nothing from elsewhere', async () => {
    const { page, requests, responses, errors } = await openPage();
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
      // The page's icon is its own file (the policy allows images of this origin only); nothing
      // answered 404, and no failed load was logged (a browser asks for /favicon.ico otherwise).
      const icon = await page.evaluate(() =>
        (globalThis as any).document.querySelector('link[rel="icon"]')?.getAttribute('href'),
      );
      expect(icon).toBe('_/assets/favicon.svg');
      await waitUntil(
        'the icon loaded',
        async () => responses,
        (r) => r.includes(`200 ${origin}/_/assets/favicon.svg`),
      );
      expect(responses.filter((r) => r.startsWith('404 '))).toEqual([]);
      expect(await page.evaluate(() => (globalThis as any).__violations)).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('shows markup in a symbol as text, and never the symbol of a rejected tick', async () => {
    const dead = await readDeadLetters(redis, ticks.config);
    expect(dead).toHaveLength(1);
    expect(dead[0].reason).toBe('invalid-tick');
    expect(JSON.parse(dead[0].fields.data).symbol).toBe(STREAM_MARKUP);

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
      // Every figure, and its label, says on hover what it counts.
      const titles = await page.$$eval('#stats dd[data-stat]', (dds: any[]) =>
        dds.map((dd) => ({
          stat: dd.dataset.stat as string,
          label: (dd.previousElementSibling.textContent as string).trim(),
          labelTitle: dd.previousElementSibling.title as string,
          title: dd.title as string,
        })),
      );
      expect(titles.map((t) => t.stat)).toEqual([
        'ticksPerSec',
        'lag',
        'pending',
        'xacksPerSec',
        'idsPerXack',
        'ackQueue',
        'inFlight',
        'handledTotal',
        'xackTotal',
      ]);
      for (const t of titles) {
        expect(t.title.length).toBeGreaterThan(20);
        expect(t.labelTitle).toBe(t.title);
      }
      const titleOf = (label: string) => titles.find((t) => t.label === label)?.title;
      expect(titleOf('pending')).toMatch(
        /^Entries delivered to the group's consumers and not acknowledged yet \(XPENDING\)/,
      );
      expect(titleOf('awaiting XACK')).toMatch(
        /^Entries handled here, queued in the transport's ack batcher/,
      );
      expect(titleOf('lag')).toMatch(
        /^Entries in the stream not delivered to the consumer group yet/,
      );
      expect(titleOf('in flight')).toMatch(/handling has not finished/);
      expect(titleOf('throughput')).toMatch(/per second/);
      expect(titleOf('XACK rate')).toMatch(/per second/);
      expect(titleOf('ids per XACK')).toMatch(/per XACK/);
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

  it('draws a symbol with a few candles as a few narrow candles, and counts them in words ("1 candle")', async () => {
    // Two new symbols: one with 1 one-minute candle, one with 3 (up, down, up), each candle a
    // tall body (from its open to its close, the whole range of the chart).
    const minute = Math.floor(Date.now() / 60_000) * 60_000 - 5 * 60_000;
    const candle = (symbol: string, start: number, open: number, close: number): FixtureTick[] => [
      { symbol, price: open, qty: 1, ts: start + 1000 },
      { symbol, price: close, qty: 1, ts: start + 30_000 },
    ];
    await publish(redis, ticks.config.consumer.stream, [
      ...candle('FEW1', minute, 100, 110),
      ...candle('FEW3', minute - 120_000, 100, 110),
      ...candle('FEW3', minute - 60_000, 110, 100),
      ...candle('FEW3', minute, 100, 110),
    ]);
    // (A symbol without ticks yet is a 404 without candles.)
    const stored = async (symbol: string) =>
      ((await api(`/symbols/${symbol}/candles?interval=1m&limit=10`)).candles ?? []).length;
    await waitFor(
      'the candles of FEW1 and FEW3',
      async () => (await stored('FEW1')) === 1 && (await stored('FEW3')) === 3,
      PAGE_WAIT_MS,
      200,
    );

    /**
     * The candle bodies on the chart's pane as the user sees them: the runs of pixel columns
     * with at least 8 pixels of a candle colour (the last price's dashed line has 1), and the
     * pane's width.
     */
    const bodies = (page: Page) =>
      page.evaluate(() => {
        const colors = [
          [0x26, 0xa6, 0x9a],
          [0xef, 0x53, 0x50],
        ];
        const canvases = [...(globalThis as any).document.querySelectorAll('#chart canvas')];
        const width = Math.max(...canvases.map((c: any) => c.width as number));
        const columns = new Array<number>(width).fill(0);
        // The pane's canvases are the widest (the price axis has its own, narrower ones).
        for (const canvas of canvases.filter((c: any) => c.width === width && c.height > 0)) {
          const { data } = canvas.getContext('2d').getImageData(0, 0, width, canvas.height);
          for (let i = 0; i < data.length; i += 4)
            if (
              colors.some(
                ([r, g, b]) =>
                  Math.abs(data[i] - r) < 4 &&
                  Math.abs(data[i + 1] - g) < 4 &&
                  Math.abs(data[i + 2] - b) < 4,
              )
            )
              columns[(i / 4) % width]++;
        }
        const runs: { from: number; to: number }[] = [];
        columns.forEach((n, x) => {
          if (n < 8) return;
          const last = runs[runs.length - 1];
          if (last && last.to === x - 1) last.to = x;
          else runs.push({ from: x, to: x });
        });
        return { width, runs: runs.map(({ from, to }) => ({ from, width: to - from + 1 })) };
      });

    for (const [symbol, count, text] of [
      ['FEW1', 1, /^1 candle · .* · 2 trades$/],
      ['FEW3', 3, /^3 candles · .* · 2 trades$/],
    ] as const) {
      const { page, errors } = await openPage(`/?symbol=${symbol}&interval=1m`);
      try {
        await waitUntil(
          `the chart of ${symbol}`,
          () => readout(page),
          (r) => r.symbol === symbol && r.candles === String(count),
        );
        expect(await page.textContent('#readout')).toMatch(text);
        const drawn = await waitUntil(
          `${count} candle bodies drawn`,
          () => bodies(page),
          (b) => b.runs.length === count,
        );
        // Each candle is as narrow as one of an hour of 1m candles (at most 1/20 of the chart,
        // where one stretched candle would take most of it), the newest in the right half.
        for (const body of drawn.runs) {
          expect(body.width).toBeGreaterThanOrEqual(2);
          expect(body.width).toBeLessThanOrEqual(drawn.width / 20);
        }
        expect(drawn.runs[count - 1].from).toBeGreaterThan(drawn.width / 2);
        expect(errors).toEqual([]);
      } finally {
        await page.close();
      }
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
