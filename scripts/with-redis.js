#!/usr/bin/env node
/*
 * Runs a command with a Redis available, and REDIS_URL set for it.
 *   1. REDIS_URL already set: use it.
 *   2. Else a Redis answering on 127.0.0.1:6379: use it.
 *   3. Else start a throwaway `redis-server` on a free port (no persistence), stop it afterwards.
 * Some tests also start and kill their own redis-server, so the binary must exist: when it is
 * missing it is installed with apt-get (Debian/Ubuntu, as root), or the script says what to install.
 *
 * SIGINT and SIGTERM are passed on to the command, and this process exits once the command has
 * (with its exit code). When its parent is gone (killed outright, or a shell killed by a SIGTERM
 * it did not pass on), the command gets a SIGTERM all the same.
 *
 * Usage: node scripts/with-redis.js <command> [args...]
 */
const { spawn, spawnSync } = require('node:child_process');
const net = require('node:net');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { ignoreOutputErrors, onParentExit } = require('./lib/parent-watch');

function log(msg) {
  process.stderr.write(`[with-redis] ${msg}\n`);
}

function ping(host, port, timeoutMs = 500) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let buf = '';
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function findRedisServer() {
  if (process.env.REDIS_SERVER_BIN && fs.existsSync(process.env.REDIS_SERVER_BIN)) {
    return process.env.REDIS_SERVER_BIN;
  }
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  if (found.status === 0 && found.stdout.trim()) return found.stdout.trim();
  for (const p of [
    '/usr/bin/redis-server',
    '/usr/local/bin/redis-server',
    '/usr/sbin/redis-server',
  ]) {
    if (fs.existsSync(p)) return p;
  }
  return undefined;
}

function ensureRedisServer() {
  let bin = findRedisServer();
  if (bin) return bin;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const hasApt = spawnSync('sh', ['-c', 'command -v apt-get']).status === 0;
  if (isRoot && hasApt) {
    log('redis-server not found: installing the Debian package redis-server');
    spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit' });
    const r = spawnSync('apt-get', ['install', '-y', '-qq', 'redis-server'], {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    if (r.status === 0) bin = findRedisServer();
  }
  if (!bin) {
    log(
      'redis-server is not installed and could not be installed automatically.\n' +
        '  Install Redis >= 6.2, then run again:\n' +
        '    Debian/Ubuntu: sudo apt-get install -y redis-server\n' +
        '    macOS:         brew install redis\n' +
        '  or point the tests at a running Redis with REDIS_URL=redis://host:port',
    );
    process.exit(1);
  }
  return bin;
}

async function startRedis(bin) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'with-redis-'));
  const child = spawn(
    bin,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: 'ignore' },
  );
  for (let i = 0; i < 100; i++) {
    if (await ping('127.0.0.1', port)) return { child, port, dir };
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`redis-server did not answer on 127.0.0.1:${port}`);
}

/** The command, once started. */
let child;
/** A signal received before the command started: main() stops instead of starting it. */
let signalled;

function onSignal(signal) {
  // Forwarded; the command's exit ends this process (see main).
  if (child) child.kill(signal);
  else signalled = signal;
}

async function main() {
  ignoreOutputErrors();
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => onSignal(signal));
  onParentExit(() => {
    log('the parent process is gone: stopping');
    onSignal('SIGTERM');
  });
  const cmd = process.argv.slice(2);
  if (cmd.length === 0) {
    log('usage: node scripts/with-redis.js <command> [args...]');
    process.exit(2);
  }
  const env = { ...process.env };
  env.REDIS_SERVER_BIN = ensureRedisServer();
  let started;
  if (env.REDIS_URL) {
    // The password stays out of the output (CI logs, terminals shared on screen).
    log(`using REDIS_URL=${env.REDIS_URL.replace(/\/\/[^\s/?#]*@/, '//***@')}`);
  } else if (await ping('127.0.0.1', 6379)) {
    env.REDIS_URL = 'redis://127.0.0.1:6379';
    log('using the Redis on 127.0.0.1:6379');
  } else {
    started = await startRedis(env.REDIS_SERVER_BIN);
    env.REDIS_URL = `redis://127.0.0.1:${started.port}`;
    log(`started a throwaway redis-server on port ${started.port}`);
  }
  const stop = () => {
    if (started) {
      started.child.kill('SIGTERM');
      fs.rmSync(started.dir, { recursive: true, force: true });
    }
  };
  if (signalled) {
    stop();
    process.exit(128 + os.constants.signals[signalled]);
  }
  child = spawn(cmd[0], cmd.slice(1), {
    stdio: 'inherit',
    env,
    shell: process.platform === 'win32',
  });
  child.on('exit', (code, signal) => {
    stop();
    process.exit(code ?? (signal ? 1 : 0));
  });
}

main().catch((err) => {
  log(err.stack || String(err));
  process.exit(1);
});
