import { ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort, ping, redisServerBin } from './redis-server';

const run = promisify(execFile);

/** A throwaway 3-master Redis Cluster on loopback (redis-server + redis-cli --cluster create). */
export class ThrowawayCluster {
  private readonly children: ChildProcess[] = [];
  private readonly dir = mkdtempSync(join(tmpdir(), 'sba-cluster-'));
  readonly ports: number[] = [];

  static async start(): Promise<ThrowawayCluster> {
    const cluster = new ThrowawayCluster();
    try {
      await cluster.boot();
    } catch (err) {
      await cluster.destroy();
      throw err;
    }
    return cluster;
  }

  get nodes(): { host: string; port: number }[] {
    return this.ports.map((port) => ({ host: '127.0.0.1', port }));
  }

  private async boot(): Promise<void> {
    const bin = redisServerBin();
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      this.ports.push(port);
      // prettier-ignore
      this.children.push(spawn(bin, [
        '--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes',
        '--cluster-config-file', join(this.dir, `nodes-${port}.conf`),
        '--save', '', '--appendonly', 'no', '--dir', this.dir,
      ], { stdio: 'ignore' }));
    }
    for (const port of this.ports) {
      const deadline = Date.now() + 10_000;
      while (!(await ping(port))) {
        if (Date.now() > deadline) throw new Error(`cluster node ${port} did not start`);
        await new Promise((r) => setTimeout(r, 30));
      }
    }
    const cli = bin.includes('/') ? join(dirname(bin), 'redis-cli') : 'redis-cli';
    await run(cli, [
      '--cluster',
      'create',
      ...this.ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    for (const port of this.ports) {
      const probe = new Redis(port, '127.0.0.1');
      try {
        for (let i = 0; i < 200; i++) {
          if ((await probe.cluster('INFO')).includes('cluster_state:ok')) break;
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        probe.disconnect();
      }
    }
  }

  async destroy(): Promise<void> {
    await Promise.all(
      this.children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGKILL');
          }),
      ),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}
