#!/usr/bin/env node
/*
 * npm run demo: the URL shortener, the ticks consumer and the tick collector, each its own
 * process, on a Redis found or started by scripts/with-redis.js.
 *
 * - Runs the built apps (dist/), building them first when dist/ is missing or older than the
 *   sources; `--from-source` runs the TypeScript sources instead (slower to start, no build).
 * - Binds HOST (default 127.0.0.1); SHORTENER_PORT (3000) and TICKS_PORT (3001).
 * - Uses a Redis key prefix of its own (`demo:<random>:`) and a SQLite file in a temporary
 *   directory; on exit it stops everything and deletes both: on Ctrl-C, on SIGINT or SIGTERM
 *   to this process alone (scripts/with-redis.js passes them on, and `npm run demo` execs it:
 *   a process manager's signal to npm reaches it), and when its parent process is gone.
 * - Prints where to look only once both apps answer their readiness endpoints.
 * - The collector publishes COLLECTOR_SYMBOLS x COLLECTOR_RATE ticks/s (default 100 x 20) and
 *   logs the rate it reaches every 10 s.
 */
const { randomBytes } = require('node:crypto');
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const path = require('node:path');
const { Redis } = require('ioredis');
const { buildIfStale } = require('./lib/build-if-stale');
const { launchApp, waitReady } = require('./lib/app-processes');
const { ignoreOutputErrors, onParentExit } = require('./lib/parent-watch');

const fromSource = process.argv.includes('--from-source');
const host = process.env.HOST ?? '127.0.0.1';
const shortenerPort = process.env.SHORTENER_PORT ?? '3000';
const ticksPort = process.env.TICKS_PORT ?? '3001';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `demo:${randomBytes(3).toString('hex')}:`;
const dataDir = mkdtempSync(path.join(tmpdir(), 'nest-redis-resilience-demo-'));
const symbols = process.env.COLLECTOR_SYMBOLS ?? '100';
const ratePerSymbol = process.env.COLLECTOR_RATE ?? '20';
const say = (line) => process.stdout.write(`[demo] ${line}\n`);

const common = { HOST: host, REDIS_URL: redisUrl, LOG_LEVEL: process.env.LOG_LEVEL ?? 'log' };
const processes = [
  {
    name: 'shortener',
    env: {
      ...common,
      PORT: shortenerPort,
      REDIS_KEY_PREFIX: `${prefix}shortener:`,
      DATABASE_URL: `sqlite:${path.join(dataDir, 'shortener.sqlite')}`,
      PUBLIC_BASE_URL: `http://${host.includes(':') ? `[${host}]` : host}:${shortenerPort}`,
    },
  },
  {
    name: 'ticks',
    env: {
      ...common,
      PORT: ticksPort,
      COLLECTOR: 'false',
      TICKS_STREAM: `${prefix}ticks`,
      TICKS_KEY_PREFIX: `${prefix}ticks:`,
    },
  },
  {
    name: 'collector',
    env: {
      ...common,
      TICKS_STREAM: `${prefix}ticks`,
      TICKS_KEY_PREFIX: `${prefix}ticks:`,
      COLLECTOR_SYMBOLS: symbols,
      COLLECTOR_RATE: ratePerSymbol,
    },
  },
];

let children = [];
let stopping = false;

function start() {
  children = processes.map(({ name, env }) =>
    launchApp(name, name, {
      env,
      fromSource,
      // Ctrl-C in a terminal signals the whole process group: a child stopped by a signal is a stop.
      onExit: (code, signal) => {
        if (!stopping) void stop(signal ? 0 : code || 1);
      },
    }),
  );
}

const ready = (url, timeoutMs) => waitReady(url, timeoutMs, () => stopping);

/** Deletes every key of this run's prefix; returns how many. */
async function removeKeys() {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on('error', () => undefined);
  let removed = 0;
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) removed += await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return removed;
}

async function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  const exited = Promise.all(
    children.map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.on('exit', r)))),
  );
  await Promise.race([exited, new Promise((r) => setTimeout(r, 4_000).unref())]);
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  try {
    say(`removed ${await removeKeys()} Redis keys of ${prefix}* and ${dataDir}`);
  } catch (err) {
    say(`could not remove the keys ${prefix}*: ${err.message}`);
  }
  rmSync(dataDir, { recursive: true, force: true });
  process.exit(code);
}

ignoreOutputErrors();
process.on('SIGINT', () => void stop(0));
process.on('SIGTERM', () => void stop(0));
onParentExit(() => {
  say('the parent process is gone: stopping');
  void stop(0);
});

async function main() {
  if (!fromSource && !buildIfStale(say)) {
    say('the build failed; see above');
    process.exit(1);
  }
  say(
    `starting (${fromSource ? 'from the TypeScript sources' : 'the built apps'}; Redis ${redisUrl}, key prefix ${prefix})`,
  );
  start();
  const base = (port) => `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const shortener = base(shortenerPort);
  const ticks = base(ticksPort);
  try {
    await Promise.all([
      ready(`${shortener}/health/ready`, 120_000),
      ready(`${ticks}/health`, 120_000),
    ]);
  } catch (err) {
    if (!stopping) {
      say(err.message);
      await stop(1);
    }
    return;
  }
  const rate = Number(symbols) * Number(ratePerSymbol);
  process.stdout.write(
    [
      '',
      `Demo ready (Ctrl-C stops it and removes its Redis keys ${prefix}*):`,
      `  URL shortener      ${shortener}/          (the page: shorten, follow, watch the cache)`,
      `  Ticks and candles  ${ticks}/          (the page: live candles and the consumer)`,
      '',
      `  API:  curl -s -XPOST ${shortener}/urls -H 'content-type: application/json' -d '{"url":"https://nestjs.com"}'`,
      `        ${ticks}/symbols  ${ticks}/symbols/SYM001/candles?interval=1m&limit=5`,
      `        health and metrics: ${shortener}/health/ready  ${shortener}/metrics  ${ticks}/health  ${ticks}/metrics`,
      `  Collector          ${symbols} symbols x ${ratePerSymbol}/s = ${rate} ticks/s; it logs the rate it reaches every 10 s`,
      '',
    ].join('\n') + '\n',
  );
}

void main();
