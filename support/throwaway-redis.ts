/*
 * Redis servers that a test (or a benchmark) owns: started on a free loopback port, with no
 * persistence, and killed at will. Shared by the tests and the benchmarks.
 */
import { spawn, ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The redis-server binary: REDIS_SERVER_BIN (set by scripts/with-redis.js) or the one on PATH. */
export function redisServerBin(): string {
  return process.env.REDIS_SERVER_BIN ?? 'redis-server';
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** A redis-server of the test's own, which the test may stop and start again on the same port. */
export class ThrowawayRedis {
  private child?: ChildProcess;
  private readonly dir = mkdtempSync(join(tmpdir(), 'throwaway-redis-'));

  private constructor(readonly port: number) {}

  static async start(): Promise<ThrowawayRedis> {
    const server = new ThrowawayRedis(await freePort());
    await server.start();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const bin = redisServerBin();
    this.child = spawn(
      bin,
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.dir,
      ],
      {
        stdio: 'ignore',
      },
    );
    // A missing binary is an 'error' event, not an exit: say so instead of waiting for a PING.
    const notStarted = new Promise<never>((_, reject) =>
      this.child!.once('error', (err) =>
        reject(
          new Error(
            `${bin} could not start (${err.message}): install redis-server or set REDIS_SERVER_BIN`,
          ),
        ),
      ),
    );
    await Promise.race([waitForRedis(this.port), notStarted]);
  }

  /** SIGKILL, as a crash would. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
    this.child = undefined;
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Resolves once a redis-server answers PING on `port`; fails after `timeoutMs`. */
export async function waitForRedis(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ping(port))) {
    if (Date.now() > deadline) {
      throw new Error(`redis-server did not start on port ${port} (is redis-server installed?)`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** True when something answers PING with +PONG on 127.0.0.1:port (a raw socket: no client to close). */
export function ping(port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let buf = '';
    const done = (ok: boolean) => {
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
