import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, ping } from '../../support/throwaway-redis';
import { waitFor } from '../support/wait';

const root = join(__dirname, '..', '..');

/*
 * scripts/demo-cluster.js itself (from the sources, as test/demo does): the banner only once all
 * six instances answer, the redirect of a code made on one instance served by another, candles
 * from the partitioned stream, and on Ctrl-C every process and the cluster's Redis servers gone
 * and the temporary directory removed. (cluster-demo.e2e-spec.ts checks the behaviour in depth.)
 */
describe('npm run demo:cluster (the script)', () => {
  jest.setTimeout(170_000);
  let demo: ChildProcess | undefined;

  afterAll(() => {
    if (demo && demo.exitCode === null) demo.kill('SIGKILL');
  });

  it('starts everything on a Cluster, says so when it is ready, and removes everything on Ctrl-C', async () => {
    const ports = async () => [await freePort(), await freePort(), await freePort()];
    const [shortenerPorts, ticksPorts] = [await ports(), await ports()];
    let output = '';
    demo = spawn(process.execPath, [join(root, 'scripts', 'demo-cluster.js'), '--from-source'], {
      cwd: root,
      env: {
        ...process.env,
        SHORTENER_PORTS: shortenerPorts.join(','),
        TICKS_PORTS: ticksPorts.join(','),
        CLUSTER_REPLICAS: '0',
        COLLECTOR_SYMBOLS: '10',
        COLLECTOR_RATE: '20',
        COLLECTOR_REPORT_MS: '1000',
        LOG_LEVEL: 'warn',
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    demo.stdout!.on('data', (chunk) => (output += chunk));
    demo.stderr!.on('data', (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => demo!.on('exit', resolve));

    await waitFor(
      'the banner',
      () => output.includes('Demo on a Redis Cluster ready'),
      150_000,
      100,
    );
    const shorteners = shortenerPorts.map((p) => `http://127.0.0.1:${p}`);
    const consumers = ticksPorts.map((p) => `http://127.0.0.1:${p}`);
    for (const url of shorteners) expect((await fetch(`${url}/health/ready`)).status).toBe(200);
    for (const url of consumers) expect((await fetch(`${url}/health`)).status).toBe(200);
    const nodes = /Redis Cluster {6}(\S+)/.exec(output)![1].split(',');
    expect(nodes).toHaveLength(3);

    const created = await fetch(`${shorteners[0]}/urls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://nestjs.com/' }),
    });
    expect(created.status).toBe(201);
    const { code } = (await created.json()) as { code: string };
    const redirect = await fetch(`${shorteners[2]}/${code}`, { redirect: 'manual' });
    expect(redirect.status).toBe(302); // one database shared by the instances
    await waitFor(
      'candles of SYM001',
      async () => {
        const res = await fetch(`${consumers[1]}/symbols/SYM001/candles?interval=1m&limit=1`);
        return (
          res.status === 200 && ((await res.json()) as { candles: unknown[] }).candles.length > 0
        );
      },
      30_000,
      250,
    );

    demo.kill('SIGINT');
    expect(await exited).toBe(0);
    const removed = /and (\S+) removed/.exec(output);
    expect(removed).toBeTruthy();
    expect(existsSync(removed![1])).toBe(false);
    for (const node of nodes) expect(await ping(Number(node.split(':')[1]))).toBe(false);
    for (const url of [...shorteners, ...consumers])
      await expect(fetch(`${url}/health/live`)).rejects.toThrow();
  });
});
