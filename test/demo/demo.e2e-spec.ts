import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { REDIS_URL } from '../support/redis';
import { freePort } from '../../support/throwaway-redis';
import { waitFor } from '../support/wait';

const root = join(__dirname, '..', '..');

/*
 * `npm run demo` as a user meets it (from the sources here: the build is the same code, and
 * building in a test would race the package test's build): the banner only once both apps
 * answer their readiness endpoints, loopback binding, a key prefix of its own, the collector's
 * reached rate, and on Ctrl-C everything stopped and every key removed.
 */
describe('npm run demo', () => {
  jest.setTimeout(180_000);
  let demo: ChildProcess | undefined;
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    if (demo && demo.exitCode === null) demo.kill('SIGKILL');
    await redis.quit();
  });

  it('says it is ready only when it is, reaches the rate it announces, and cleans up on Ctrl-C', async () => {
    const [shortenerPort, ticksPort] = [await freePort(), await freePort()];
    let output = '';
    demo = spawn(process.execPath, [join(root, 'scripts', 'demo.js'), '--from-source'], {
      cwd: root,
      env: {
        ...process.env,
        REDIS_URL,
        SHORTENER_PORT: String(shortenerPort),
        TICKS_PORT: String(ticksPort),
        COLLECTOR_SYMBOLS: '10',
        COLLECTOR_RATE: '20',
        COLLECTOR_REPORT_MS: '1000',
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    demo.stdout!.on('data', (chunk) => (output += chunk));
    demo.stderr!.on('data', (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => demo!.on('exit', resolve));

    await waitFor('the banner', () => output.includes('Demo ready'), 150_000, 100);
    // The banner came after both readiness endpoints answered: they answer now.
    const shortener = `http://127.0.0.1:${shortenerPort}`;
    expect((await fetch(`${shortener}/health/ready`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${ticksPort}/health`)).status).toBe(200);
    expect(output).toContain(`URL shortener      ${shortener}/ `);
    expect(output).toContain(`Ticks and candles  http://127.0.0.1:${ticksPort}/ `);
    for (const page of [`${shortener}/`, `http://127.0.0.1:${ticksPort}/`]) {
      const res = await fetch(page);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/html');
    }
    expect(output).toContain(`HTTP on http://127.0.0.1:${ticksPort}`); // bound to loopback
    const prefix = /key prefix (demo:[0-9a-f]+:)/.exec(output)![1];

    const created = await fetch(`${shortener}/urls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://nestjs.com/' }),
    });
    expect(created.status).toBe(201);
    await waitFor(
      'three rate reports',
      () => (output.match(/reached \d+ ticks\/s/g) ?? []).length >= 3,
      30_000,
    );
    const reports = [...output.matchAll(/reached (\d+) ticks\/s over the last ([\d.]+) s/g)].map(
      (m) => ({ rate: Number(m[1]), seconds: Number(m[2]) }),
    );
    // The collector paces itself to 10 x 20 = 200 ticks/s (the first second includes start-up).
    expect(Math.max(...reports.slice(1).map((r) => r.rate))).toBeGreaterThan(150);
    // It never runs ahead of that pace since it started. (One second may be above it: after a
    // stall of the machine it catches up.)
    const published = reports.reduce((n, r) => n + r.rate * r.seconds, 0);
    const seconds = reports.reduce((n, r) => n + r.seconds, 0);
    expect(published / seconds).toBeLessThan(220); // the printed seconds are rounded
    expect((await redis.keys(`${prefix}*`)).length).toBeGreaterThan(0);

    demo.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
    const removed = /removed \d+ Redis keys of \S+ and (\S+)/.exec(output);
    expect(removed).toBeTruthy();
    expect(existsSync(removed![1])).toBe(false);
  });
});
