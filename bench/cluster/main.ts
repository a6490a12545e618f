/*
 * npm run bench:cluster -- [options]
 *
 * The same load on one Redis and on a 3-master Redis Cluster (both private redis-servers on free
 * loopback ports, started and removed by scripts/lib/local-cluster.js), measured per node with
 * INFO commandstats before and after: commands per second per master, the busiest master's share
 * and the spread between the busiest and the idlest, and the throughput.
 *
 *   ticks      the demo-ticks consumers (--consumers, default 3) in one group over the stream
 *              split into --partitions (default 6) partitions, fed by the collector at
 *              --symbols x --rate ticks/s (default 100 x 100 = 10,000) for --seconds (default 10);
 *              measured from the collector's start until the consumers have handled every tick.
 *   shortener  3 shortener instances on one SQLite file, 1,000 codes, redirects by autocannon
 *              (--connections per instance, default 10) for --redirect-seconds (default 8):
 *              uniform   every code in turn
 *              hot       one code takes every redirect (its key lives in one slot: one master)
 *              hot + L1  the same on 3 other instances with CACHE_L1_ENTRIES (the in-process tier)
 *
 *   (--help lists the options)
 *
 * The apps run from their TypeScript sources (scripts/register-ts.js: transpiled at load, the
 * same code as the build). On a 2-core machine the apps, the load generators and the Redis
 * servers share the cores, so absolute throughput does not scale with masters; the spread does.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import {
  freePort,
  LocalCluster,
  LocalSingle,
  startLocalCluster,
  startSingle,
} from '../../scripts/lib/local-cluster';
import { AppProcess } from '../../support/app-process';
import { cliOptions } from '../shared/args';
import { collectEnvInfo, formatEnvInfo, gitRevision } from '../shared/env-info';
import { Column, renderTable } from '../shared/table';
import { runLoad } from '../shortener/load';
import { NodeLoad, snapshot, spread } from './node-stats';

type Topology = 'single' | 'cluster';

const O = cliOptions(
  'npm run bench:cluster',
  'The same load on one Redis and on a 3-master Redis Cluster, measured per node with INFO commandstats.',
  {
    seconds: { type: 'number', default: 10, help: 'ticks: how long the collector publishes' },
    symbols: { type: 'number', default: 100, help: 'ticks: symbols' },
    rate: { type: 'number', default: 100, help: 'ticks: ticks per second per symbol' },
    partitions: { type: 'number', default: 6, help: 'ticks: partitions of the stream' },
    consumers: { type: 'number', default: 3, help: 'ticks: demo-ticks consumers in the group' },
    'redirect-seconds': {
      type: 'number',
      default: 8,
      help: 'shortener: seconds of redirects per row',
    },
    connections: {
      type: 'number',
      default: 10,
      help: 'shortener: autocannon connections per instance',
    },
    codes: { type: 'number', default: 1000, help: 'shortener: codes created' },
    only: {
      type: 'list',
      choices: ['ticks', 'shortener'],
      default: ['ticks', 'shortener'],
      help: 'the parts to run',
    },
    topologies: {
      type: 'list',
      choices: ['single', 'cluster'],
      default: ['single', 'cluster'],
      help: 'the Redis topologies',
    },
    json: {
      type: 'string',
      default: '',
      placeholder: '<file>',
      help: 'also write the results as JSON',
    },
  },
  process.argv.slice(2),
);
const SECONDS = O.seconds;
const SYMBOLS = O.symbols;
const RATE = O.rate;
const PARTITIONS = O.partitions;
const CONSUMERS = O.consumers;
const REDIRECT_SECONDS = O['redirect-seconds'];
const CONNECTIONS = O.connections;
const CODES = O.codes;
const ONLY = O.only;
const TOPOLOGIES = O.topologies as Topology[];
const JSON_FILE = O.json;

const say = (line: string) => process.stderr.write(`[bench:cluster] ${line}\n`);

interface Deployment {
  topology: Topology;
  /** The masters whose commands are counted. */
  ports: number[];
  env: Record<string, string>;
  stop(): Promise<void>;
}

async function deploy(topology: Topology): Promise<Deployment> {
  if (topology === 'single') {
    const single: LocalSingle = await startSingle();
    return {
      topology,
      ports: [single.port],
      env: { REDIS_URL: single.url },
      stop: () => single.stop(500),
    };
  }
  const cluster: LocalCluster = await startLocalCluster({ masters: 3 });
  return {
    topology,
    ports: (await cluster.roles()).masters,
    env: { REDIS_CLUSTER_NODES: cluster.nodesEnv },
    stop: () => cluster.stop(500),
  };
}

async function startAll(apps: AppProcess[], path: (a: AppProcess) => string): Promise<void> {
  try {
    await Promise.all(apps.map((a) => a.ready(path(a), 180_000)));
  } catch (err) {
    await Promise.all(apps.map((a) => a.stop('SIGKILL')));
    throw err;
  }
}

interface Row {
  topology: Topology;
  scenario: string;
  seconds: number;
  /** Ticks handled per second, or redirects per second. */
  throughput: number;
  /** Ticks the collector published per second (ticks only). */
  offered?: number;
  dbLookups?: number;
  nodes: NodeLoad[];
  totalCalls: number;
  busiestShare: number;
  spreadPct: number;
  busiestUsecShare: number;
}

async function benchTicks(topology: Topology): Promise<Row> {
  const d = await deploy(topology);
  const ports: number[] = [];
  for (let i = 0; i < CONSUMERS; i++) ports.push(await freePort());
  const env = {
    ...d.env,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    TICKS_STREAM: 'ticks',
    TICKS_PARTITIONS: String(PARTITIONS),
  };
  const consumers = ports.map(
    (port, i) =>
      new AppProcess(
        `consumer-${i + 1}`,
        'ticks',
        { ...env, PORT: String(port), COLLECTOR: 'false', TICKS_CONSUMER: `c${i + 1}` },
        `http://127.0.0.1:${port}`,
      ),
  );
  try {
    await startAll(consumers, () => '/health');
    const before = await snapshot(d.ports);
    const t0 = Date.now();
    const collector = new AppProcess('collector', 'collector', {
      ...env,
      COLLECTOR_SYMBOLS: String(SYMBOLS),
      COLLECTOR_RATE: String(RATE),
      COLLECTOR_DURATION_MS: String(SECONDS * 1000),
      COLLECTOR_REPORT_MS: '100000',
    });
    await collector.exited;
    const stats = JSON.parse(collector.output.trim().split('\n').pop() ?? '{}') as {
      published: number;
      startedAt: number;
      endedAt: number;
    };
    if (!stats.published) throw new Error(`collector failed:\n${collector.output.slice(-2000)}`);
    const handled = async () =>
      (await Promise.all(consumers.map((c) => c.metric('ticks_handled_total')))).reduce(
        (a, b) => a + b,
        0,
      );
    const deadline = Date.now() + 120_000;
    while ((await handled()) < stats.published && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
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
  const env = {
    ...d.env,
    HOST: '127.0.0.1',
    DATABASE_URL: `sqlite:${join(dir, 'shortener.sqlite')}`,
    CACHE_TTL: '10m',
  };
  const make = async (name: string, extra: Record<string, string>) => {
    const port = await freePort();
    return new AppProcess(
      name,
      'shortener',
      { ...env, ...extra, PORT: String(port) },
      `http://127.0.0.1:${port}`,
    );
  };
  const plain = [await make('s1', {}), await make('s2', {}), await make('s3', {})];
  const withL1 = [
    await make('l1-1', { CACHE_L1_ENTRIES: '10000' }),
    await make('l1-2', { CACHE_L1_ENTRIES: '10000' }),
    await make('l1-3', { CACHE_L1_ENTRIES: '10000' }),
  ];
  const all = [...plain, ...withL1];
  try {
    await startAll(all, () => '/health/ready');
    const codes: string[] = [];
    for (let i = 0; i < CODES; i += 20) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(20, CODES - i) }, (_, k) =>
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
    const lookups = async (apps: AppProcess[]) =>
      (await Promise.all(apps.map((a) => a.metric('shortener_db_lookups_total')))).reduce(
        (a, b) => a + b,
        0,
      );
    const rows: Row[] = [];
    const workloads: [string, AppProcess[], string[]][] = [
      ['redirects, uniform over 1,000 codes', plain, codes],
      ['redirects, one hot code', plain, [codes[0]]],
      ['redirects, one hot code, L1', withL1, [codes[0]]],
    ];
    for (const [scenario, apps, codesUsed] of workloads) {
      // Let the previous workload's last redirect counts reach Redis (flushed every 100 ms).
      await new Promise((r) => setTimeout(r, 500));
      const lookupsBefore = await lookups(apps);
      const before = await snapshot(d.ports);
      const t0 = Date.now();
      const results = await Promise.all(
        apps.map((a, i) =>
          runLoad({
            url: a.url!,
            connections: CONNECTIONS,
            durationS: REDIRECT_SECONDS,
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

function perSecond(row: Row): string {
  return row.nodes
    .map((n) => Math.round(n.calls / row.seconds).toLocaleString('en-US'))
    .join(' / ');
}

async function main(): Promise<void> {
  const header = await startSingle();
  const probe = new Redis(header.port, '127.0.0.1');
  const env = await collectEnvInfo(probe, 'private redis-servers on loopback', [
    'ioredis',
    '@nestjs/core',
  ]);
  probe.disconnect();
  await header.stop(500);
  const rows: Row[] = [];
  for (const topology of TOPOLOGIES) {
    if (ONLY.includes('ticks')) {
      say(`${topology}: ticks at ${SYMBOLS * RATE}/s for ${SECONDS} s...`);
      rows.push(await benchTicks(topology));
    }
    if (ONLY.includes('shortener')) {
      say(`${topology}: shortener redirects...`);
      rows.push(...(await benchShortener(topology)));
    }
  }
  const columns: Column<Row>[] = [
    { header: 'topology', value: (r) => (r.topology === 'single' ? '1 node' : '3 masters') },
    { header: 'scenario', value: (r) => r.scenario },
    {
      header: 'offered/s',
      value: (r) => (r.offered === undefined ? undefined : Math.round(r.offered)),
    },
    { header: 'throughput/s', value: (r) => Math.round(r.throughput) },
    { header: 'commands/s per master', value: perSecond },
    { header: 'busiest %', value: (r) => r.busiestShare, digits: 1 },
    { header: 'spread %', value: (r) => r.spreadPct, digits: 1 },
    { header: 'busiest % of Redis time', value: (r) => r.busiestUsecShare, digits: 1 },
    { header: 'DB lookups', value: (r) => r.dbLookups },
  ];
  const out = [
    '',
    `bench:cluster (${gitRevision(['apps', 'libs', 'bench/cluster'])})`,
    formatEnvInfo(env),
    '',
    renderTable(columns, rows),
    '',
    'offered: ticks/s the collector published; throughput: ticks handled/s (collector start to the last tick handled) or redirects/s (3 instances)',
    'commands/s per master: INFO commandstats deltas per node (scripts count their inner commands too)',
    "busiest %: the busiest master's share of all commands; spread %: (busiest - idlest) / total",
    '',
    'busiest commands per master:',
    ...rows.map(
      (r) =>
        `  ${r.topology === 'single' ? '1 node' : '3 masters'}, ${r.scenario}: ${r.nodes.map((n) => `[${n.top}]`).join(' ')}`,
    ),
    '',
  ].join('\n');
  process.stdout.write(out);
  const ticksCluster = rows.find((r) => r.topology === 'cluster' && r.scenario.startsWith('ticks'));
  if (ticksCluster)
    process.stdout.write(
      `target: no master above 40 % of the commands on 3 masters at ${SYMBOLS * RATE} ticks/s: busiest ${ticksCluster.busiestShare.toFixed(1)} % (${ticksCluster.busiestShare <= 40 ? 'met' : 'NOT met'})\n`,
    );
  if (JSON_FILE) writeFileSync(JSON_FILE, JSON.stringify({ env, rows }, null, 2));
}

main().catch((err) => {
  process.stderr.write(`bench:cluster failed: ${err?.stack ?? err}\n`);
  process.exit(1);
});
