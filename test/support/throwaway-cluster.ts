import { ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort, redisServerBin, waitForRedis } from '../../support/throwaway-redis';

const run = promisify(execFile);

/** A throwaway 3-master Redis Cluster on loopback, made with redis-server and redis-cli. */
export class ThrowawayCluster {
  private readonly children: ChildProcess[] = [];
  private readonly dir = mkdtempSync(join(tmpdir(), 'throwaway-cluster-'));
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

  private async boot(): Promise<void> {
    const bin = redisServerBin();
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      this.ports.push(port);
      // prettier-ignore
      this.children.push(spawn(bin, [
        '--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes',
        '--cluster-config-file', join(this.dir, `nodes-${port}.conf`), '--save', '', '--appendonly', 'no', '--dir', this.dir,
      ], { stdio: 'ignore' }));
    }
    for (const port of this.ports) await waitForRedis(port);
    const cli = join(bin, '..', 'redis-cli');
    const nodes = this.ports.map((p) => `127.0.0.1:${p}`);
    await run(cli.includes('/') ? cli : 'redis-cli', [
      '--cluster',
      'create',
      ...nodes,
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    for (const port of this.ports) {
      const probe = new Redis(port, '127.0.0.1');
      try {
        for (let i = 0; i < 200 && !(await probe.cluster('INFO')).includes('cluster_state:ok'); i++)
          await new Promise((r) => setTimeout(r, 50));
      } finally {
        probe.disconnect();
      }
    }
  }

  get nodes(): { host: string; port: number }[] {
    return this.ports.map((port) => ({ host: '127.0.0.1', port }));
  }

  async destroy(): Promise<void> {
    await Promise.all(
      this.children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGKILL');
          }),
      ),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}
