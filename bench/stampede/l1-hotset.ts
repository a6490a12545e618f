/*
 * The l1-hotset scenario of bench:stampede (--scenario tiers, or by name): Zipf-popular keys over
 * several instances, a pattern without and with the library's in-process tier (`+l1`: the
 * instances' StampedeModule gets `l1: true`), on a private redis-server.
 */
import { PrivateRedis } from '../shared/private-redis';
import { Column, renderTable } from '../shared/table';
import type { Target } from '../shared/targets';
import { PatternName } from './patterns';
import {
  CommandCounts,
  commandDelta,
  renderCommandBreakdown,
  totalCommands,
} from './command-counts';
import { logTargets, q, ScenarioContext } from './context';
import { startInstances } from './instances';
import { doubleRefreshes, LoadJob, warmAndMeasure } from './load';
import { parseVariant } from './options';

/**
 * Loads per request of a cache-aside that loads every key exactly once per TTL when it is asked
 * for: each key is a renewal process (cached for one TTL after a load, then loaded by the next
 * request), so a key asked for lambda times per TTL is loaded lambda / (1 + lambda) times per
 * TTL. Zipf(n, s) popularity, `rate` requests per second in all. Load times are neglected.
 */
export function idealLoadsPerRequest(n: number, s: number, rate: number, ttlMs: number): number {
  const perTtl = (rate * ttlMs) / 1000;
  let sum = 0;
  for (let r = 0; r < n; r++) sum += s === 0 ? 1 : 1 / Math.pow(r + 1, s);
  let loads = 0;
  for (let r = 0; r < n; r++) {
    const lambda = (perTtl * (s === 0 ? 1 : 1 / Math.pow(r + 1, s))) / sum;
    loads += lambda / (1 + lambda);
  }
  return loads / perTtl;
}

// --- l1-hotset ----------------------------------------------------------------------------

export interface L1HotsetRow {
  variant: string;
  pattern: PatternName;
  l1: boolean;
  instances: number;
  keys: number;
  zipf: number;
  rate: number;
  ttl_ms: number;
  duration_ms: number;
  reqs: number;
  loads: number;
  loads_per_req: number;
  lock_waits: number;
  joins: number;
  /** Library commands of the measured run (commandstats delta). */
  cmds: number;
  cmds_per_req: number;
  /** Probe: cold keys called once each on one instance (every call a miss and a load). */
  cmds_per_load: number;
  /** loads_per_req x cmds_per_load: what the loads alone cost per request. */
  floor_cmds_per_req: number;
  hot_keys: number;
  loads_per_hot_key_per_ttl: number;
  max_loads_key_per_ttl: number;
  double_refreshes: number;
  /** Calls that neither ran the loader nor joined a flight that ran it (measured in the caller). */
  hits: number;
  hit_share: number;
  hit_p50: number;
  hit_p99: number;
  /** p99 of the hits served by the in-process tier. */
  l1_hit_p99: number;
  /** Hits that read Redis (or joined a flight that read it), and their latency. */
  store_hits: number;
  store_hit_p50: number;
  store_hit_p99: number;
  /**
   * Misses measured in the caller: calls that ran the loader, calls that waited for another
   * instance's lock (its load), and calls that joined a flight that did either.
   */
  ran_load: number;
  waited_lock: number;
  joined_load: number;
  /** l1Hits (library) or bento-like's own L1 hits, per request. */
  l1_hit_share: number;
  /** CPU time of the instances (user + system, load generator included) per request, in us. */
  cpu_us_per_req: number;
  store_errors: number;
  commands: CommandCounts;
}

export const L1_HOTSET_COLUMNS: Column<L1HotsetRow>[] = [
  { header: 'variant', value: (r) => r.variant },
  { header: 'inst', value: (r) => r.instances },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads', value: (r) => r.loads },
  { header: 'loads/req', value: (r) => r.loads_per_req, digits: 3 },
  { header: 'cmds', value: (r) => r.cmds },
  { header: 'cmds/req', value: (r) => r.cmds_per_req, digits: 3 },
  { header: 'cmds/load', value: (r) => r.cmds_per_load, digits: 2 },
  { header: 'floor_cmds/req', value: (r) => r.floor_cmds_per_req, digits: 3 },
  { header: 'loads/key/ttl(top)', value: (r) => r.loads_per_hot_key_per_ttl, digits: 3 },
  { header: 'max_loads/key/ttl', value: (r) => r.max_loads_key_per_ttl, digits: 2 },
  { header: 'double_refresh', value: (r) => r.double_refreshes },
  { header: 'hits', value: (r) => r.hits },
  { header: 'hit_p50_ms', value: (r) => r.hit_p50, digits: 3 },
  { header: 'hit_p99_ms', value: (r) => r.hit_p99, digits: 3 },
  { header: 'l1_hits%', value: (r) => `${(100 * r.l1_hit_share).toFixed(1)}%` },
  { header: 'l1_hit_p99_ms', value: (r) => r.l1_hit_p99, digits: 3 },
  { header: 'redis_hits', value: (r) => r.store_hits },
  { header: 'redis_hit_p50_ms', value: (r) => r.store_hit_p50, digits: 3 },
  { header: 'redis_hit_p99_ms', value: (r) => r.store_hit_p99, digits: 3 },
  { header: 'ran_load', value: (r) => r.ran_load },
  { header: 'waited_lock', value: (r) => r.waited_lock },
  { header: 'joined_load', value: (r) => r.joined_load },
  { header: 'cpu_us/req', value: (r) => r.cpu_us_per_req, digits: 0 },
  { header: 'store_err', value: (r) => r.store_errors },
];

export async function l1Hotset(ctx: ScenarioContext): Promise<L1HotsetRow[]> {
  const o = ctx.opts;
  const k = Math.max(1, o.l1HotsetInstances);
  const variants = o.l1HotsetVariants.map(parseVariant);
  const ideal = idealLoadsPerRequest(
    o.l1HotsetKeys,
    o.l1HotsetZipf,
    o.l1HotsetRate,
    o.l1HotsetTtlMs,
  );
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## l1-hotset: ${redis.describe()}; ${o.l1HotsetKeys} keys, Zipf s=${o.l1HotsetZipf}, Poisson ${o.l1HotsetRate} req/s in all` +
      `${k > 1 ? ` over ${k} forked instances (${Math.round(o.l1HotsetRate / k)} each)` : ' in this process'}, TTL ${o.l1HotsetTtlMs} ms, ` +
      `backend ${o.l1HotsetBackendMs} ms, ${o.l1HotsetDurationMs} ms measured after ${o.l1HotsetWarmupMs} ms of warm-up; ` +
      `+l1 = StampedeModule l1: true; cmds/load from ${o.l1HotsetProbeKeys} cold keys called once; hits = calls that did not run a load, wait for a lock or join a flight that did; ` +
      `a cache-aside loading each key once per TTL makes ${ideal.toFixed(3)} loads per request here (Zipf model)`,
  );
  const rows = new Map<string, L1HotsetRow>();
  try {
    for (const l1 of [false, true]) {
      const group = variants.filter((v) => v.l1 === l1);
      if (!group.length) continue;
      const instances = await startInstances(
        ctx.config(o.l1HotsetTtlMs, {
          redisUrl: redis.url,
          backendMs: o.l1HotsetBackendMs,
          recordLoads: true,
          operationTimeout: o.operationTimeoutMs,
          cooldown: o.cooldownMs,
          moduleOptions: l1 ? { l1: true } : undefined,
        }),
        k,
      );
      try {
        for (const v of group) {
          // Load the scripts (EVALSHA's first NOSCRIPT + EVAL) before anything is counted.
          const probe: LoadJob = {
            pattern: v.pattern,
            keyPrefix: `l1hs-prime:${v.name}:`,
            keys: 1,
            zipf: 0,
            mode: 'sweep',
            concurrency: 20,
          };
          await instances[0].load(probe);
          const s0 = await redis.commandCounts();
          const cold = await instances[0].load({
            ...probe,
            keyPrefix: `l1hs-probe:${v.name}:`,
            keys: o.l1HotsetProbeKeys,
          });
          const s1 = await redis.commandCounts();
          const coldCmds = totalCommands(commandDelta(s1, s0));
          const job: LoadJob = {
            pattern: v.pattern,
            keyPrefix: `l1hs:${v.name}:`,
            keys: o.l1HotsetKeys,
            zipf: o.l1HotsetZipf,
            mode: 'poisson',
            rate: o.l1HotsetRate / k,
            durationMs: o.l1HotsetWarmupMs,
          };
          const run = await warmAndMeasure(instances, redis, job, o.l1HotsetDurationMs, {
            classify: true,
          });
          const { results, commands, cmds, reqs, loads, perKey } = run;
          const c = run.counters;
          const ttls = o.l1HotsetDurationMs / o.l1HotsetTtlMs;
          const hot = Math.min(o.l1HotsetHotKeys, o.l1HotsetKeys);
          let hotLoads = 0;
          for (let r = 0; r < hot; r++) hotLoads += perKey.get(`${job.keyPrefix}${r}`) ?? 0;
          const l1Hits = results.flatMap((r) => r.l1HitLatencies ?? []);
          const storeHits = results.flatMap((r) => r.storeHitLatencies ?? []);
          const hits = [...l1Hits, ...storeHits];
          const cmdsPerLoad = cold.counters.loads ? coldCmds / cold.counters.loads : NaN;
          rows.set(v.name, {
            variant: v.name,
            pattern: v.pattern,
            l1: v.l1,
            instances: k,
            keys: o.l1HotsetKeys,
            zipf: o.l1HotsetZipf,
            rate: o.l1HotsetRate,
            ttl_ms: o.l1HotsetTtlMs,
            duration_ms: o.l1HotsetDurationMs,
            reqs,
            loads: c.loads,
            loads_per_req: c.loads / reqs,
            lock_waits: c.lockWaits,
            joins: c.joins,
            cmds,
            cmds_per_req: cmds / reqs,
            cmds_per_load: cmdsPerLoad,
            floor_cmds_per_req: (c.loads / reqs) * cmdsPerLoad,
            hot_keys: hot,
            loads_per_hot_key_per_ttl: hotLoads / hot / ttls,
            max_loads_key_per_ttl: Math.max(0, ...perKey.values()) / ttls,
            double_refreshes: doubleRefreshes(loads, o.l1HotsetTtlMs / 2),
            hits: hits.length,
            hit_share: hits.length / reqs,
            hit_p50: q(hits, 0.5),
            hit_p99: q(hits, 0.99),
            l1_hit_p99: q(l1Hits, 0.99),
            store_hits: storeHits.length,
            store_hit_p50: q(storeHits, 0.5),
            store_hit_p99: q(storeHits, 0.99),
            ran_load: results.reduce((a, r) => a + (r.ranLoad ?? 0), 0),
            waited_lock: results.reduce((a, r) => a + (r.waitedLock ?? 0), 0),
            joined_load: results.reduce((a, r) => a + (r.joinedLoad ?? 0), 0),
            l1_hit_share: c.l1Hits / reqs,
            cpu_us_per_req: (1000 * results.reduce((a, r) => a + r.cpuMs, 0)) / reqs,
            store_errors: c.storeErrors + cold.counters.storeErrors,
            commands,
          });
        }
      } finally {
        await Promise.all(instances.map((i) => i.close()));
      }
    }
  } finally {
    await redis.stop();
  }
  const out = variants.map((v) => rows.get(v.name)!);
  ctx.log(renderTable(L1_HOTSET_COLUMNS, out));
  ctx.log(
    `\nl1-hotset: commandstats of the measured run by command (calls; commands inside scripts counted under their own name)`,
  );
  ctx.log(
    renderCommandBreakdown(
      out.map((r) => ({
        name: r.variant,
        commands: r.commands,
        cmds: r.cmds,
        perRequest: r.cmds_per_req,
      })),
    ),
  );
  logTargets(ctx, l1HotsetTargets(out, ideal));
  return out;
}

export function l1HotsetTargets(rows: L1HotsetRow[], ideal: number): Target[] {
  const refs = (f: (r: L1HotsetRow) => string) => {
    const others = rows.filter((r) => !r.l1);
    return others.length ? ` (${others.map((r) => `${r.variant} ${f(r)}`).join('; ')})` : '';
  };
  const targets: Target[] = [];
  for (const r of rows.filter((x) => x.l1)) {
    targets.push(
      {
        id: 'l1-hotset',
        text: `${r.variant}: <= 0.3 Redis commands per request`,
        met: r.cmds_per_req <= 0.3,
        measured:
          `${r.cmds_per_req.toFixed(3)}; floor of its loads ${r.loads_per_req.toFixed(3)} loads/req x ${r.cmds_per_load.toFixed(2)} cmds/load = ` +
          `${r.floor_cmds_per_req.toFixed(3)}, of one load per key per TTL ${ideal.toFixed(3)} x ${r.cmds_per_load.toFixed(2)} = ${(ideal * r.cmds_per_load).toFixed(3)}` +
          refs((x) => x.cmds_per_req.toFixed(3)),
      },
      ...(r.instances === 1
        ? [
            {
              id: 'l1-hotset',
              text: `${r.variant}: <= 0.97 Redis commands per request in one process`,
              met: r.cmds_per_req <= 0.97,
              measured:
                `${r.cmds_per_req.toFixed(3)} (${r.cmds_per_load.toFixed(2)} cmds/load)` +
                refs((x) => x.cmds_per_req.toFixed(3)),
            },
          ]
        : []),
      {
        id: 'l1-hotset',
        text: `${r.variant}: <= 1 load per key per TTL (top ${r.hot_keys} keys, across ${r.instances} instance(s), tolerance 5%)`,
        met: r.loads_per_hot_key_per_ttl <= 1.05,
        measured:
          `${r.loads_per_hot_key_per_ttl.toFixed(3)}, max ${r.max_loads_key_per_ttl.toFixed(2)}, double ${r.double_refreshes}` +
          refs((x) => x.loads_per_hot_key_per_ttl.toFixed(3)),
      },
      {
        id: 'l1-hotset',
        text: `${r.variant}: p99 of hits < 1 ms`,
        met: r.hit_p99 < 1,
        measured:
          `${r.hit_p99} ms (p50 ${r.hit_p50} ms, ${r.hits} hits; L1 hits p99 ${r.l1_hit_p99} ms, ` +
          `Redis hits ${r.store_hits}, p99 ${r.store_hit_p99} ms)` +
          refs((x) => `${x.hit_p99} ms`),
      },
    );
  }
  return targets;
}
