#!/usr/bin/env node
/*
 * npm run demo:cluster: both demos on a local Redis Cluster.
 *
 * - Starts a Redis Cluster on loopback: 3 masters and 3 replicas (CLUSTER_REPLICAS=0 for masters
 *   only), on free ports, in a temporary directory (scripts/lib/local-cluster.js).
 * - 3 URL shortener instances (SHORTENER_PORT, +1, +2, default 3000-3002, or the list
 *   SHORTENER_PORTS=a,b,c) sharing one database:
 *   a SQLite file in WAL mode in the temporary directory, or DATABASE_URL (PostgreSQL, MySQL).
 * - 3 ticks consumers (TICKS_PORT, +1, +2, default 3010-3012, or TICKS_PORTS) in one group over the
 *   stream `ticks` split into TICKS_PARTITIONS partitions (default 6, two per master), and one
 *   collector publishing COLLECTOR_SYMBOLS x COLLECTOR_RATE ticks/s (default 100 x 20),
 *   partitioned by symbol.
 * - Runs the built apps (building them once when dist/ is missing or stale), or the TypeScript
 *   sources with `--from-source`. Binds HOST (default 127.0.0.1).
 * - Prints where to look only once every instance answers its readiness endpoint.
 * - Ctrl-C, SIGINT or SIGTERM to this process alone (`npm run demo:cluster` execs it: a signal
 *   to npm reaches it), its parent process exiting, or any instance exiting stops everything:
 *   the apps, the Redis servers, the temporary directory (SQLite file included), within 5 s.
 */
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const path = require('node:path');
const { startLocalCluster } = require('./lib/local-cluster');
const { buildIfStale } = require('./lib/build-if-stale');
const { launchApp, waitReady } = require('./lib/app-processes');
const { ignoreOutputErrors, onParentExit } = require('./lib/parent-watch');

const fromSource = process.argv.includes('--from-source');
const host = process.env.HOST ?? '127.0.0.1';
/** PORTS (a comma-separated list of 3) when set, else BASE, BASE+1, BASE+2. */
function ports(list, base) {
  if (list) return list.split(',').map(Number);
  return [0, 1, 2].map((i) => Number(base) + i);
}
const shortenerPorts = ports(process.env.SHORTENER_PORTS, process.env.SHORTENER_PORT ?? 3000);
const ticksPorts = ports(process.env.TICKS_PORTS, process.env.TICKS_PORT ?? 3010);
const replicas = Number(process.env.CLUSTER_REPLICAS ?? 1);
const partitions = process.env.TICKS_PARTITIONS ?? '6';
const symbols = process.env.COLLECTOR_SYMBOLS ?? '100';
const ratePerSymbol = process.env.COLLECTOR_RATE ?? '20';
const INSTANCES = 3;
const say = (line) => process.stdout.write(`[demo-cluster] ${line}\n`);
const urlHost = host.includes(':') ? `[${host}]` : host;
const base = (port) => `http://${urlHost}:${port}`;

let dataDir;
let cluster;
let children = [];
let stopping = false;

function launch(name, app, env) {
  const child = launchApp(name, app, {
    env,
    fromSource,
    // Ctrl-C in a terminal signals the whole process group: a child stopped by a signal is a stop.
    onExit: (code, signal) => {
      if (!stopping) void stop(signal ? 0 : code || 1);
    },
  });
  children.push(child);
  return child;
}

const ready = (url, timeoutMs) => waitReady(url, timeoutMs, () => stopping);

async function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  const exited = Promise.all(
    children.map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.on('exit', r)))),
  );
  // The apps close their connections and flush their acks; a few seconds at most.
  await Promise.race([exited, new Promise((r) => setTimeout(r, 2500).unref())]);
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  if (cluster) await cluster.stop(1000);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  say(`stopped: ${children.length} app processes, the Redis Cluster, and ${dataDir} removed`);
  process.exit(code);
}

ignoreOutputErrors();
process.on('SIGINT', () => void stop(0));
process.on('SIGTERM', () => void stop(0));
onParentExit(() => {
  say('the parent process is gone: stopping');
  void stop(0);
});

async function main() {
  if (!fromSource && !buildIfStale(say)) {
    say('the build failed; see above');
    process.exit(1);
  }
  say(
    `starting a Redis Cluster: 3 masters${replicas > 0 ? ` + ${3 * replicas} replicas` : ''} on ${host === '127.0.0.1' ? 'loopback' : '127.0.0.1'}...`,
  );
  try {
    cluster = await startLocalCluster({ masters: 3, replicasPerMaster: replicas });
  } catch (err) {
    say(`could not start the Redis Cluster: ${err.message}`);
    process.exit(1);
  }
  if (stopping) return;
  dataDir = mkdtempSync(path.join(tmpdir(), 'nest-redis-resilience-demo-cluster-'));
  const { masters } = await cluster.roles();
  const databaseUrl =
    process.env.DATABASE_URL ?? `sqlite:${path.join(dataDir, 'shortener.sqlite')}`;
  const common = {
    HOST: host,
    REDIS_CLUSTER_NODES: cluster.nodesEnv,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'log',
  };
  const ticksEnv = { ...common, TICKS_STREAM: 'ticks', TICKS_PARTITIONS: partitions };
  const shorteners = [];
  const consumers = [];
  for (let i = 0; i < INSTANCES; i++) {
    const port = shortenerPorts[i];
    shorteners.push(base(port));
    launch(`shortener-${i + 1}`, 'shortener', {
      ...common,
      PORT: String(port),
      DATABASE_URL: databaseUrl,
      PUBLIC_BASE_URL: base(shortenerPorts[0]),
    });
  }
  for (let i = 0; i < INSTANCES; i++) {
    const port = ticksPorts[i];
    consumers.push(base(port));
    launch(`ticks-${i + 1}`, 'ticks', {
      ...ticksEnv,
      PORT: String(port),
      COLLECTOR: 'false',
      TICKS_CONSUMER: `consumer-${i + 1}`,
    });
  }
  try {
    await Promise.all([
      ...shorteners.map((url) => ready(`${url}/health/ready`, 120_000)),
      ...consumers.map((url) => ready(`${url}/health`, 120_000)),
    ]);
  } catch (err) {
    if (!stopping) {
      say(err.message);
      await stop(1);
    }
    return;
  }
  // The collector starts once the consumers are up, so that its first ticks are consumed at once.
  launch('collector', 'collector', {
    ...ticksEnv,
    COLLECTOR_SYMBOLS: symbols,
    COLLECTOR_RATE: ratePerSymbol,
  });
  const rate = Number(symbols) * Number(ratePerSymbol);
  const first = shorteners[0];
  process.stdout.write(
    [
      '',
      'Demo on a Redis Cluster ready (Ctrl-C stops everything and removes the cluster):',
      `  Redis Cluster      ${cluster.nodesEnv}`,
      `    masters:         ${masters.map((p) => `127.0.0.1:${p}`).join(' ')}  (redis-cli -c -p ${masters[0]} cluster nodes)`,
      `  URL shortener      ${shorteners.join('  ')}  (the page at /; one database: ${databaseUrl.replace(/\/\/([^@/]*)@/, '//***@')})`,
      `    shorten:         curl -s -XPOST ${first}/urls -H 'content-type: application/json' -d '{"url":"https://nestjs.com"}'`,
      `    redirect:        curl -si ${shorteners[1]}/1   (any instance; one database lookup per code per TTL across all three)`,
      `    lookups:         curl -s ${first}/metrics | grep db_lookups_total`,
      `  Ticks consumers    ${consumers.join('  ')}  (the page at /; one group over ${partitions} partitions of "ticks")`,
      `    candles:         ${consumers[0]}/symbols/SYM001/candles?interval=1m&limit=5`,
      `    health:          ${consumers[0]}/health  (lag and pending per partition)`,
      `  Collector          ${symbols} symbols x ${ratePerSymbol}/s = ${rate} ticks/s, partitioned by symbol`,
      '',
    ].join('\n') + '\n',
  );
}

void main();
