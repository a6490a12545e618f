/*
 * npm run bench:cluster -- [options]   (--help lists them)
 *
 * The same load on one Redis and on a 3-master Redis Cluster (private redis-servers started by
 * scripts/lib/local-cluster.js), measured per node with INFO commandstats before and after:
 * commands per second per master, the busiest master's share and the spread, and the throughput.
 *   ticks      the demo-ticks consumers in one group over a partitioned stream, fed by the
 *              collector; measured until the consumers have handled every tick.
 *   shortener  3 shortener instances on one SQLite file, redirects by autocannon: every code in
 *              turn; one hot code (its key lives in one slot: one master); the same on 3 other
 *              instances with CACHE_L1_ENTRIES (the in-process tier).
 * The apps run from their TypeScript sources. On a 2-core machine the apps, the load generators
 * and the Redis servers share the cores, so absolute throughput does not scale with masters; the
 * spread does.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startLocalCluster, startSingle } from '../../scripts/lib/local-cluster';
import { AppProcess } from '../../support/app-process';
import { cliOptions, list, num, str } from '../shared/args';
import { PrivateRedis } from '../shared/private-redis';
import { collectEnvInfo, formatEnvInfo, gitRevision } from '../shared/env-info';
import { columns } from '../shared/columns';
import { renderTable } from '../shared/table';
import { runLoad } from '../shared/load';
import { snapshot, spread } from './node-stats';

type Topology = 'single' | 'cluster';

const O = cliOptions(
  'npm run bench:cluster',
  'The same load on one Redis and on a 3-master Redis Cluster, measured per node with INFO commandstats.',
  {
    seconds: num(10, 'ticks: how long the collector publishes'),
    symbols: num(100, 'ticks: symbols'),
    rate: num(100, 'ticks: ticks per second per symbol'),
    partitions: num(6, 'ticks: partitions of the stream'),
    consumers: num(3, 'ticks: demo-ticks consumers in the group'),
    'redirect-seconds': num(8, 'shortener: seconds of redirects per row'),
    connections: num(10, 'shortener: autocannon connections per instance'),
    codes: num(1000, 'shortener: codes created'),
    only: list(['ticks', 'shortener'], ['ticks', 'shortener'], 'the parts to run'),
    topologies: list(['single', 'cluster'], ['single', 'cluster'], 'the Redis topologies'),
    json: str('', 'also write the results as JSON', '<file>'),
  },
  process.argv.slice(2),
);
const { seconds: SECONDS, symbols: SYMBOLS, rate: RATE, partitions: PARTITIONS } = O;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const say = (line: string) => process.stderr.write(`[bench:cluster] ${line}\n`);

/** `ports`: the masters whose commands are counted. */
async function deploy(
  topology: Topology,
): Promise<{ ports: number[]; env: Record<string, string>; stop(): Promise<void> }> {
  if (topology === 'single') {
    const single = await startSingle();
    return { ports: [single.port], env: { REDIS_URL: single.url }, stop: () => single.stop(500) };
  }
  const cluster = await startLocalCluster({ masters: 3 });
  const ports = (await cluster.roles()).masters;
  return { ports, env: { REDIS_CLUSTER_NODES: cluster.nodesEnv }, stop: () => cluster.stop(500) };
}

const metricSum = async (apps: AppProcess[], name: string) =>
  (await Promise.all(apps.map((a) => a.metric(name)))).reduce((a, b) => a + b, 0);

async function startAll(apps: AppProcess[], path: (a: AppProcess) => string): Promise<void> {
  try {
    await Promise.all(apps.map((a) => a.ready(path(a), 180_000)));
  } catch (err) {
    await Promise.all(apps.map((a) => a.stop('SIGKILL')));
    throw err;
  }
}

/** throughput: ticks handled or redirects per second; offered: ticks the collector published per second. */
type Row = ReturnType<typeof spread> & {
  topology: Topology;
  scenario: string;
  seconds: number;
  throughput: number;
  offered?: number;
  dbLookups?: number;
};

async function benchTicks(topology: Topology): Promise<Row> {
  const d = await deploy(topology);
  const ports: number[] = [];
  for (let i = 0; i < O.consumers; i++) ports.push(await freePort());
  const env = {
    ...d.env,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    TICKS_STREAM: 'ticks',
    TICKS_PARTITIONS: String(PARTITIONS),
  };
  const consumers = ports.map((port, i) => {
    const own = { PORT: String(port), COLLECTOR: 'false', TICKS_CONSUMER: `c${i + 1}` };
    return new AppProcess(
      `consumer-${i + 1}`,
      'ticks',
      { ...env, ...own },
      `http://127.0.0.1:${port}`,
    );
  });
  try {
    await startAll(consumers, () => '/health');
    const before = await snapshot(d.ports);
    const t0 = Date.now();
    const collector = new AppProcess('collector', 'collector', {
      ...{ ...env, COLLECTOR_SYMBOLS: String(SYMBOLS), COLLECTOR_RATE: String(RATE) },
      ...{ COLLECTOR_DURATION_MS: String(SECONDS * 1000), COLLECTOR_REPORT_MS: '100000' },
    });
    await collector.exited;
    const stats = JSON.parse(collector.output.trim().split('\n').pop() ?? '{}') as Record<
      'published' | 'startedAt' | 'endedAt',
      number
    >;
    if (!stats.published) throw new Error(`collector failed:\n${collector.output.slice(-2000)}`);
    const handled = () => metricSum(consumers, 'ticks_handled_total');
    const deadline = Date.now() + 120_000;
    while ((await handled()) < stats.published && Date.now() < deadline) await sleep(100);
    const t1 = Date.now();
    const after = await snapshot(d.ports);
    const seconds = (t1 - t0) / 1000;
    return {
      topology,
      scenario: `ticks ${SYMBOLS}x${RATE}/s, ${PARTITIONS} partitions`,
      seconds,
      throughput: (await handled()) / ((t1 - stats.startedAt) / 1000),
      offered: stats.published / ((stats.endedAt - stats.startedAt) / 1000),
      ...spread(before, after),
    };
  } finally {
    await Promise.all(consumers.map((c) => c.stop('SIGTERM', 3000)));
    await d.stop();
  }
}

async function benchShortener(topology: Topology): Promise<Row[]> {
  const d = await deploy(topology);
  const dir = mkdtempSync(join(tmpdir(), 'bench-cluster-'));
  const env = { ...d.env, HOST: '127.0.0.1', CACHE_TTL: '10m' };
  const make = async (name: string, extra: Record<string, string>) => {
    const port = await freePort();
    const db = { DATABASE_URL: `sqlite:${join(dir, 'shortener.sqlite')}`, PORT: String(port) };
    return new AppProcess(
      name,
      'shortener',
      { ...env, ...extra, ...db },
      `http://127.0.0.1:${port}`,
    );
  };
  const plain: AppProcess[] = [];
  const withL1: AppProcess[] = [];
  for (const i of [1, 2, 3]) plain.push(await make(`s${i}`, {}));
  for (const i of [1, 2, 3]) withL1.push(await make(`l1-${i}`, { CACHE_L1_ENTRIES: '10000' }));
  const all = [...plain, ...withL1];
  try {
    await startAll(all, () => '/health/ready');
    const codes: string[] = [];
    for (let i = 0; i < O.codes; i += 20) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(20, O.codes - i) }, (_, k) =>
          fetch(`${plain[0].url}/urls`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ url: `https://example.com/bench/${i + k}` }),
          }).then(async (r) => ((await r.json()) as { code: string }).code),
        ),
      );
      codes.push(...batch);
    }
    // Warm the cache: every code once (one lookup each).
    for (let i = 0; i < codes.length; i += 50)
      await Promise.all(
        codes.slice(i, i + 50).map((c) => fetch(`${plain[0].url}/${c}`, { redirect: 'manual' })),
      );
    const lookups = (apps: AppProcess[]) => metricSum(apps, 'shortener_db_lookups_total');
    const rows: Row[] = [];
    const workloads: [string, AppProcess[], string[]][] = [
      ['redirects, uniform over 1,000 codes', plain, codes],
      ['redirects, one hot code', plain, [codes[0]]],
      ['redirects, one hot code, L1', withL1, [codes[0]]],
    ];
    for (const [scenario, apps, codesUsed] of workloads) {
      // Let the previous workload's last redirect counts reach Redis (flushed every 100 ms).
      await sleep(500);
      const lookupsBefore = await lookups(apps);
      const before = await snapshot(d.ports);
      const t0 = Date.now();
      const results = await Promise.all(
        apps.map((a, i) =>
          runLoad({
            url: a.url!,
            connections: O.connections,
            durationS: O['redirect-seconds'],
            expectStatus: 302,
            // Each instance starts at a different place in the list.
            paths: codesUsed.map((_, k) => `/${codesUsed[(k + i * 333) % codesUsed.length]}`),
          }),
        ),
      );
      const t1 = Date.now();
      const after = await snapshot(d.ports);
      const unexpected = results.reduce((s, r) => s + r.unexpected + r.errors, 0);
      if (unexpected > 0) say(`${scenario}: ${unexpected} answers were not 302`);
      rows.push({
        topology,
        scenario,
        seconds: (t1 - t0) / 1000,
        throughput: results.reduce((s, r) => s + r.rps, 0),
        dbLookups: (await lookups(apps)) - lookupsBefore,
        ...spread(before, after),
      });
    }
    return rows;
  } finally {
    await Promise.all(all.map((a) => a.stop('SIGTERM', 3000)));
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const perSecond = (r: Row) =>
  r.nodes.map((n) => Math.round(n.calls / r.seconds).toLocaleString('en-US')).join(' / ');
const label = (r: Row) => (r.topology === 'single' ? '1 node' : '3 masters');

async function main(): Promise<void> {
  const probe = await PrivateRedis.start();
  const packages = ['ioredis', '@nestjs/core'];
  const env = await collectEnvInfo(probe.control, 'private redis-servers on loopback', packages);
  await probe.stop();
  const rows: Row[] = [];
  for (const topology of O.topologies as Topology[]) {
    if (O.only.includes('ticks')) {
      say(`${topology}: ticks at ${SYMBOLS * RATE}/s for ${SECONDS} s...`);
      rows.push(await benchTicks(topology));
    }
    if (O.only.includes('shortener')) {
      say(`${topology}: shortener redirects...`);
      rows.push(...(await benchShortener(topology)));
    }
  }
  const table = columns<Row>(
    'topology, scenario, offered/s, throughput/s, commands/s per master, busiest %=busiestShare:1, spread %=spreadPct:1, busiest % of Redis time=busiestUsecShare:1, DB lookups',
    {
      topology: label,
      'offered/s': (r) => r.offered && Math.round(r.offered),
      'throughput/s': (r) => Math.round(r.throughput),
      'commands/s per master': perSecond,
      'DB lookups': (r) => r.dbLookups,
    },
  );
  const out = [
    '',
    `bench:cluster (${gitRevision(['apps', 'libs', 'bench/cluster'])})`,
    formatEnvInfo(env),
    '',
    renderTable(table, rows),
    '',
    'offered: ticks/s the collector published; throughput: ticks handled/s (collector start to the last tick handled) or redirects/s (3 instances)',
    'commands/s per master: INFO commandstats deltas per node (scripts count their inner commands too)',
    "busiest %: the busiest master's share of all commands; spread %: (busiest - idlest) / total",
    '',
    'busiest commands per master:',
    ...rows.map(
      (r) => `  ${label(r)}, ${r.scenario}: ${r.nodes.map((n) => `[${n.top}]`).join(' ')}`,
    ),
    '',
  ].join('\n');
  process.stdout.write(out);
  const ticksCluster = rows.find((r) => r.topology === 'cluster' && r.scenario.startsWith('ticks'));
  if (ticksCluster)
    process.stdout.write(
      `target: no master above 40 % of the commands on 3 masters at ${SYMBOLS * RATE} ticks/s: busiest ${ticksCluster.busiestShare.toFixed(1)} % (${ticksCluster.busiestShare <= 40 ? 'met' : 'NOT met'})\n`,
    );
  if (O.json) writeFileSync(O.json, JSON.stringify({ env, rows }, null, 2));
}

main().catch((err) => {
  process.stderr.write(`bench:cluster failed: ${err?.stack ?? err}\n`);
  process.exit(1);
});
