/*
 * A local Redis Cluster on loopback, for the cluster demo (scripts/demo-cluster.js), its e2e test
 * (test/cluster-demo/) and the benchmark (bench/cluster/): N masters (default 3), optionally R
 * replicas per master, made with `redis-server` and `redis-cli --cluster create`.
 *
 * - Free ports, one temporary directory (node configs, logs), no persistence.
 * - The servers run in a process group of their own, so that Ctrl-C in a terminal (which signals
 *   the caller's whole group) leaves them up until the caller has stopped its apps.
 * - `stop(graceMs = 2000)` kills every server (SIGTERM, then SIGKILL after `graceMs`) and removes
 *   the directory. The servers are also killed when this process exits for any reason
 *   (a process 'exit' hook), so none is left behind by a crash of the caller.
 * - `startSingle()` starts one plain (non-cluster) server the same way, for comparisons.
 *
 *   const { startLocalCluster } = require('./lib/local-cluster');
 *   const cluster = await startLocalCluster({ masters: 3, replicasPerMaster: 1 });
 *   cluster.nodes  // [{ host: '127.0.0.1', port }, ...] the seed nodes for ioredis' Cluster
 *   await cluster.stop();
 */
const { spawn, spawnSync, execFile } = require('node:child_process');
const { existsSync, mkdtempSync, rmSync } = require('node:fs');
const net = require('node:net');
const { tmpdir } = require('node:os');
const path = require('node:path');
const { promisify } = require('node:util');
const { Redis } = require('ioredis');

const run = promisify(execFile);
const HOST = '127.0.0.1';

/** Every server started by this module and not yet stopped: killed when the process exits. */
const live = new Set();
let exitHookInstalled = false;
function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of live) if (child.exitCode === null) child.kill('SIGKILL');
  });
}

/** The redis-server binary: REDIS_SERVER_BIN, PATH, or the usual places; undefined when missing. */
function findRedisServer() {
  if (process.env.REDIS_SERVER_BIN && existsSync(process.env.REDIS_SERVER_BIN))
    return process.env.REDIS_SERVER_BIN;
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  if (found.status === 0 && found.stdout.trim()) return found.stdout.trim();
  return ['/usr/bin/redis-server', '/usr/local/bin/redis-server', '/usr/sbin/redis-server'].find(
    (p) => existsSync(p),
  );
}

/** redis-cli next to redis-server, else the one on PATH. */
function findRedisCli(serverBin) {
  const beside = path.join(path.dirname(serverBin), 'redis-cli');
  return existsSync(beside) ? beside : 'redis-cli';
}

function missingBinaryError() {
  return new Error(
    'redis-server was not found (set REDIS_SERVER_BIN or install it: sudo apt-get install -y redis-server, or brew install redis)',
  );
}

/** A TCP port free on loopback right now. */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, HOST, () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Runs `fn(client)` on a short-lived connection to one node. */
async function withNode(port, fn) {
  const client = new Redis(port, HOST, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 1000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await fn(client);
  } finally {
    client.disconnect();
  }
}

/** Polls `check()` until it is true; throws `what` after `timeoutMs`. */
async function until(what, check, timeoutMs = 20_000, everyMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`local cluster: ${what} within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

function parseInfo(text) {
  const out = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** Starts redis-server processes on free ports in `dir`; `cluster` adds the cluster options. */
async function spawnServers(bin, dir, count, cluster, extraArgs) {
  const servers = [];
  for (let i = 0; i < count; i++) {
    const port = await freePort();
    // prettier-ignore
    const args = [
      '--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--dir', dir,
      '--logfile', path.join(dir, `redis-${port}.log`), '--protected-mode', 'no',
    ];
    if (cluster) {
      // prettier-ignore
      args.push('--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout', '2000');
    }
    args.push(...extraArgs);
    // A process group of its own: Ctrl-C in a terminal signals the caller's group, and the servers
    // must outlive the apps' shutdown (their last acks); stop() and the exit hook end them.
    const child = spawn(bin, args, { stdio: 'ignore', detached: true });
    live.add(child);
    child.once('exit', () => live.delete(child));
    servers.push({ port, child });
  }
  await Promise.all(
    servers.map(({ port, child }) =>
      until(`redis-server on port ${port} answered PING`, async () => {
        if (child.exitCode !== null) throw new Error(`redis-server on ${port} exited`);
        return (await withNode(port, (c) => c.ping())) === 'PONG';
      }),
    ),
  );
  return servers;
}

/** Stops `servers` (SIGTERM, then SIGKILL after `graceMs`) and removes `dir`. */
async function stopServers(servers, dir, graceMs = 2000) {
  await Promise.all(
    servers.map(
      ({ child }) =>
        new Promise((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Starts a Redis Cluster of `masters` masters (at least 3) and `replicasPerMaster` replicas each,
 * waits until every node reports `cluster_state:ok` and every replica is in sync.
 */
async function startLocalCluster({ masters = 3, replicasPerMaster = 0, extraArgs = [] } = {}) {
  if (masters < 3) throw new Error('a Redis Cluster needs at least 3 masters');
  const bin = findRedisServer();
  if (!bin) throw missingBinaryError();
  installExitHook();
  const dir = mkdtempSync(path.join(tmpdir(), 'nest-redis-resilience-cluster-'));
  const total = masters * (1 + replicasPerMaster);
  let servers = [];
  let stopped;
  const stop = (graceMs) => (stopped ??= stopServers(servers, dir, graceMs));
  try {
    servers = await spawnServers(bin, dir, total, true, extraArgs);
    const addresses = servers.map(({ port }) => `${HOST}:${port}`);
    // prettier-ignore
    await run(findRedisCli(bin), [
      '--cluster', 'create', ...addresses, '--cluster-replicas', String(replicasPerMaster), '--cluster-yes',
    ], { timeout: 60_000 });
    await Promise.all(
      servers.map(({ port }) =>
        until(`node ${port} reported cluster_state:ok`, () =>
          withNode(port, async (c) => (await c.cluster('INFO')).includes('cluster_state:ok')),
        ),
      ),
    );
    if (replicasPerMaster > 0) {
      await until(
        'every replica in sync with its master',
        async () => {
          const roles = await Promise.all(
            servers.map(({ port }) =>
              withNode(port, async (c) => parseInfo(await c.info('replication'))),
            ),
          );
          const replicas = roles.filter((r) => r.role === 'slave');
          return (
            replicas.length === masters * replicasPerMaster &&
            replicas.every((r) => r.master_link_status === 'up')
          );
        },
        30_000,
        100,
      );
    }
  } catch (err) {
    await stop();
    throw err;
  }

  const cluster = {
    dir,
    bin,
    /** Every node (masters and replicas), as ioredis' Cluster seed nodes. */
    nodes: servers.map(({ port }) => ({ host: HOST, port })),
    ports: servers.map(({ port }) => port),
    /** `127.0.0.1:p1,127.0.0.1:p2,...`: the apps' REDIS_CLUSTER_NODES. */
    get nodesEnv() {
      return cluster.ports.map((p) => `${HOST}:${p}`).join(',');
    },
    /** The current masters and replicas, by asking each node (roles change on failover). */
    async roles() {
      const out = { masters: [], replicas: [] };
      for (const { port, child } of servers) {
        if (child.exitCode !== null || child.signalCode !== null) continue;
        try {
          const info = parseInfo(await withNode(port, (c) => c.info('replication')));
          if (info.role === 'master') out.masters.push(port);
          else out.replicas.push({ port, masterPort: Number(info.master_port) });
        } catch {
          // down
        }
      }
      return out;
    },
    /**
     * `CLUSTER FAILOVER` on the replica `replicaPort` (a coordinated failover: the master stops
     * writes until the replica caught up, so no acknowledged write is lost); resolves once the
     * replica is a master and every node agrees the cluster is ok.
     */
    async failover(replicaPort) {
      await withNode(replicaPort, (c) => c.cluster('FAILOVER'));
      await until(`replica ${replicaPort} became master`, async () => {
        const info = parseInfo(await withNode(replicaPort, (c) => c.info('replication')));
        return info.role === 'master';
      });
      await Promise.all(
        servers.map(({ port }) =>
          until(`node ${port} reported cluster_state:ok after the failover`, () =>
            withNode(port, async (c) => (await c.cluster('INFO')).includes('cluster_state:ok')),
          ),
        ),
      );
    },
    /** INFO <section> of one node, parsed. */
    info: (port, section) => withNode(port, async (c) => parseInfo(await c.info(section))),
    stop,
  };
  return cluster;
}

/** One plain redis-server (no cluster) on a free port, with the same lifecycle. */
async function startSingle({ extraArgs = [] } = {}) {
  const bin = findRedisServer();
  if (!bin) throw missingBinaryError();
  installExitHook();
  const dir = mkdtempSync(path.join(tmpdir(), 'nest-redis-resilience-redis-'));
  let servers = [];
  let stopped;
  const stop = (graceMs) => (stopped ??= stopServers(servers, dir, graceMs));
  try {
    servers = await spawnServers(bin, dir, 1, false, extraArgs);
  } catch (err) {
    await stop();
    throw err;
  }
  const port = servers[0].port;
  return {
    dir,
    bin,
    port,
    url: `redis://${HOST}:${port}`,
    info: (section) => withNode(port, async (c) => parseInfo(await c.info(section))),
    stop,
  };
}

module.exports = { startLocalCluster, startSingle, findRedisServer, freePort, parseInfo };
