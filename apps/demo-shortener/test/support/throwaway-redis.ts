import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:net';

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

/** True when something on 127.0.0.1:port answers PING with +PONG (a raw socket: no client timers). */
function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let buf = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
  });
}

/** A redis-server of the test's own, which it may kill (SIGKILL) and start again on the same port. */
export class ThrowawayRedis {
  private child?: ChildProcess;
  private readonly dir = mkdtempSync(join(tmpdir(), 'shortener-redis-'));

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
    const bin = process.env.REDIS_SERVER_BIN ?? 'redis-server';
    const child = spawn(
      bin,
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore', cwd: this.dir },
    );
    child.on('error', () => undefined);
    this.child = child;
    for (let i = 0; i < 200 && child.exitCode === null; i++) {
      if (await pings(this.port)) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(
      `${bin} did not start on port ${this.port}: is redis-server installed (or REDIS_SERVER_BIN set)?`,
    );
  }

  /** SIGKILL, as a crash would. */
  async kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  }

  async destroy(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
