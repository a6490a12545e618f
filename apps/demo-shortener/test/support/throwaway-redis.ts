import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

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
    const probe = new Redis(this.port, '127.0.0.1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on('error', () => undefined);
    try {
      for (let i = 0; i < 200; i++) {
        if (child.exitCode !== null) break;
        try {
          await probe.connect();
          await probe.ping();
          return;
        } catch {
          probe.disconnect();
          await new Promise((r) => setTimeout(r, 25));
        }
      }
      throw new Error(
        `${bin} did not start on port ${this.port}: is redis-server installed (or REDIS_SERVER_BIN set)?`,
      );
    } finally {
      probe.disconnect();
    }
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
