#!/usr/bin/env node
/*
 * Starts the whole demo: the URL shortener (HTTP), the ticks consumer (HTTP + Redis Streams
 * consumer) and the tick collector, each its own process. Run through `npm run demo`, which
 * finds or starts a Redis first (scripts/with-redis.js). Ctrl-C stops everything.
 */
const { spawn } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const register = path.join(root, 'scripts', 'register-ts.js');
const shortenerPort = process.env.SHORTENER_PORT ?? '3000';
const ticksPort = process.env.TICKS_PORT ?? '3001';

const processes = [
  { name: 'shortener', entry: 'apps/demo-shortener/src/main.ts', env: { PORT: shortenerPort } },
  {
    name: 'ticks',
    entry: 'apps/demo-ticks/src/main.ts',
    env: { PORT: ticksPort, COLLECTOR: 'false' },
  },
  { name: 'collector', entry: 'apps/demo-ticks/src/collector.main.ts', env: {} },
];

const children = processes.map(({ name, entry, env }) => {
  const child = spawn(process.execPath, ['-r', register, path.join(root, entry)], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const prefix = `[${name}] `;
  for (const stream of [child.stdout, child.stderr]) {
    let buffered = '';
    stream.on('data', (chunk) => {
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop();
      for (const line of lines) process.stdout.write(prefix + line + '\n');
    });
  }
  child.on('exit', (code, signal) => {
    process.stdout.write(`${prefix}exited (${signal ?? code})\n`);
    if (!stopping) stop(code ?? 1);
  });
  return child;
});

let stopping = false;
function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  setTimeout(() => process.exit(code), 5000).unref();
  Promise.all(
    children.map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.on('exit', r)))),
  ).then(() => process.exit(code));
}
process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));

setTimeout(() => {
  if (stopping) return;
  const redis = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  process.stdout.write(
    [
      '',
      'Demo running (Ctrl-C stops it):',
      `  Redis               ${redis}`,
      `  URL shortener       http://127.0.0.1:${shortenerPort}`,
      `    shorten:          curl -s -XPOST localhost:${shortenerPort}/urls -H 'content-type: application/json' -d '{"url":"https://nestjs.com"}'`,
      `    health, metrics:  http://127.0.0.1:${shortenerPort}/health  http://127.0.0.1:${shortenerPort}/metrics`,
      `  Ticks and candles   http://127.0.0.1:${ticksPort}/symbols`,
      `    candles:          http://127.0.0.1:${ticksPort}/symbols/SYM001/candles?interval=1m&limit=5`,
      `    health, metrics:  http://127.0.0.1:${ticksPort}/health  http://127.0.0.1:${ticksPort}/metrics`,
      '',
    ].join('\n') + '\n',
  );
}, 4000).unref();
