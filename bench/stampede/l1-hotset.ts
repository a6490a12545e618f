/*
 * The l1-hotset scenario of bench:stampede (--scenario tiers, or by name): Zipf-popular keys over
 * several instances, a pattern without and with the library's in-process tier (`+l1`: the
 * instances' StampedeModule gets `l1: true`), on a private redis-server.
 */
import { columns } from '../shared/columns';
import type { PrivateRedis } from '../shared/private-redis';
import type { Target } from '../shared/targets';
import { commandBreakdown, eachOf, q, runScenario, ScenarioContext } from './scenario';
import { Instance, withInstances } from './instances';
import { LoadResult } from './load';
import { BenchOptions, group, parseVariant, TierVariant } from './options';
import { hotsetRun } from './hotset';

/**
 * Loads per request of a cache-aside that loads every key exactly once per TTL when it is asked
 * for: each key is a renewal process (cached for one TTL after a load, then loaded by the next
 * request), so a key asked for lambda times per TTL is loaded lambda / (1 + lambda) times per
 * TTL. Zipf(n, s) popularity, `rate` requests per second in all. Load times are neglected.
 */
export function idealLoadsPerRequest(n: number, s: number, rate: number, ttlMs: number): number {
  const perTtl = (rate * ttlMs) / 1000;
  const weight = (r: number) => (s === 0 ? 1 : 1 / Math.pow(r + 1, s));
  let sum = 0;
  for (let r = 0; r < n; r++) sum += weight(r);
  let loads = 0;
  for (let r = 0; r < n; r++) {
    const lambda = (perTtl * weight(r)) / sum;
    loads += lambda / (1 + lambda);
  }
  return loads / perTtl;
}

export type L1HotsetRow = Awaited<ReturnType<typeof l1HotsetRow>>;

export const L1_HOTSET_COLUMNS = columns<L1HotsetRow>(
  'variant, inst=instances, reqs, loads, loads/req=loads_per_req:3, cmds, cmds/req=cmds_per_req:3, ' +
    'cmds/load=cmds_per_load:2, floor_cmds/req=floor_cmds_per_req:3, ' +
    'loads/key/ttl(top)=loads_per_hot_key_per_ttl:3, max_loads/key/ttl=max_loads_key_per_ttl:2, ' +
    'double_refresh=double_refreshes, hits, hit_p50_ms=hit_p50:3, hit_p99_ms=hit_p99:3, l1_hits%, ' +
    'l1_hit_p99_ms=l1_hit_p99:3, redis_hits=store_hits, redis_hit_p50_ms=store_hit_p50:3, ' +
    'redis_hit_p99_ms=store_hit_p99:3, ran_load, waited_lock, joined_load, ' +
    'cpu_us/req=cpu_us_per_req:0, store_err=store_errors',
  { 'l1_hits%': (r) => `${(100 * r.l1_hit_share).toFixed(1)}%` },
);

async function l1HotsetRow(
  ctx: ScenarioContext,
  instances: Instance[],
  redis: PrivateRedis,
  v: TierVariant,
) {
  const g = group(ctx.opts, 'l1Hotset');
  const hs = await hotsetRun(g, instances, redis, v.pattern, ['l1hs', v.name], false, {
    classify: true,
  });
  const { cold, run } = hs;
  const { results, reqs, counters: c } = run;
  const l1Hits = results.flatMap((r) => r.l1HitLatencies ?? []);
  const storeHits = results.flatMap((r) => r.storeHitLatencies ?? []);
  const hits = [...l1Hits, ...storeHits];
  const cmdsPerLoad = cold.res.counters.loads ? cold.cmds / cold.res.counters.loads : NaN;
  const sum = (f: (r: LoadResult) => number | undefined) =>
    results.reduce((a, r) => a + (f(r) ?? 0), 0);
  return {
    variant: v.name,
    pattern: v.pattern,
    l1: v.l1,
    ...hs.row,
    loads_per_req: c.loads / reqs,
    lock_waits: c.lockWaits,
    joins: c.joins,
    /** Probe: cold keys called once each on one instance (every call a miss and a load). */
    cmds_per_load: cmdsPerLoad,
    /** loads_per_req x cmds_per_load: what the loads alone cost per request. */
    floor_cmds_per_req: (c.loads / reqs) * cmdsPerLoad,
    /** Calls that neither ran the loader nor joined a flight that ran it (measured in the caller). */
    hits: hits.length,
    hit_share: hits.length / reqs,
    hit_p50: q(hits, 0.5),
    hit_p99: q(hits, 0.99),
    l1_hit_p99: q(l1Hits, 0.99),
    /** Hits that read Redis (or joined a flight that read it). */
    store_hits: storeHits.length,
    store_hit_p50: q(storeHits, 0.5),
    store_hit_p99: q(storeHits, 0.99),
    /** Misses measured in the caller (LoadResult.ranLoad, waitedLock, joinedLoad). */
    ran_load: sum((r) => r.ranLoad),
    waited_lock: sum((r) => r.waitedLock),
    joined_load: sum((r) => r.joinedLoad),
    /** l1Hits (library) or bento-like's own L1 hits, per request. */
    l1_hit_share: c.l1Hits / reqs,
    /** CPU time of the instances (load generator included) per request, us. */
    cpu_us_per_req: (1000 * sum((r) => r.cpuMs)) / reqs,
    store_errors: c.storeErrors + cold.res.counters.storeErrors,
    commands: run.commands,
  };
}

export function l1Hotset(ctx: ScenarioContext) {
  const o = ctx.opts;
  const k = Math.max(1, o.l1HotsetInstances);
  const variants = o.l1HotsetVariants.map(parseVariant);
  const ideal = idealOf(o);
  return runScenario(ctx, {
    privateRedis: true,
    title: (redis) =>
      `l1-hotset: ${redis.describe()}; ${o.l1HotsetKeys} keys, Zipf s=${o.l1HotsetZipf}, Poisson ${o.l1HotsetRate} req/s in all` +
      `${k > 1 ? ` over ${k} forked instances (${Math.round(o.l1HotsetRate / k)} each)` : ' in this process'}, TTL ${o.l1HotsetTtlMs} ms, ` +
      `backend ${o.l1HotsetBackendMs} ms, ${o.l1HotsetDurationMs} ms measured after ${o.l1HotsetWarmupMs} ms of warm-up; ` +
      `+l1 = StampedeModule l1: true; cmds/load from ${o.l1HotsetProbeKeys} cold keys called once; hits = calls that did not run a load, wait for a lock or join a flight that did; ` +
      `a cache-aside loading each key once per TTL makes ${ideal.toFixed(3)} loads per request here (Zipf model)`,
    rows: async (redis) => {
      // The variants without L1 share instances, and those with it: rows in the variants' order.
      const rows = new Map<string, L1HotsetRow>();
      for (const l1 of [false, true]) {
        const same = variants.filter((v) => v.l1 === l1);
        if (!same.length) continue;
        const moduleOptions = l1 ? { l1: true } : undefined;
        const extra = { backendMs: o.l1HotsetBackendMs, recordLoads: true, moduleOptions };
        await withInstances(ctx.config(o.l1HotsetTtlMs, extra, redis), k, (instances) =>
          eachOf(same, async (v) => rows.set(v.name, await l1HotsetRow(ctx, instances, redis, v))),
        );
      }
      return variants.map((v) => rows.get(v.name)!);
    },
    columns: L1_HOTSET_COLUMNS,
    after: (rows) => commandBreakdown('l1-hotset', rows, (r) => r.variant),
    targets: (rows) => l1HotsetTargets(rows, o),
  });
}

const idealOf = (o: BenchOptions) =>
  idealLoadsPerRequest(o.l1HotsetKeys, o.l1HotsetZipf, o.l1HotsetRate, o.l1HotsetTtlMs);

function l1HotsetTargets(rows: L1HotsetRow[], o: BenchOptions): Target[] {
  const ideal = idealOf(o);
  const others = rows.filter((r) => !r.l1);
  const refs = (f: (r: L1HotsetRow) => string) =>
    others.length ? ` (${others.map((r) => `${r.variant} ${f(r)}`).join('; ')})` : '';
  return rows
    .filter((x) => x.l1)
    .flatMap((r) => [
      {
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
              text: `${r.variant}: <= 0.97 Redis commands per request in one process`,
              met: r.cmds_per_req <= 0.97,
              measured:
                `${r.cmds_per_req.toFixed(3)} (${r.cmds_per_load.toFixed(2)} cmds/load)` +
                refs((x) => x.cmds_per_req.toFixed(3)),
            },
          ]
        : []),
      {
        text: `${r.variant}: <= 1 load per key per TTL (top ${r.hot_keys} keys, across ${r.instances} instance(s), tolerance 5%)`,
        met: r.loads_per_hot_key_per_ttl <= 1.05,
        measured:
          `${r.loads_per_hot_key_per_ttl.toFixed(3)}, max ${r.max_loads_key_per_ttl.toFixed(2)}, double ${r.double_refreshes}` +
          refs((x) => x.loads_per_hot_key_per_ttl.toFixed(3)),
      },
      {
        text: `${r.variant}: p99 of hits < 1 ms`,
        met: r.hit_p99 < 1,
        measured:
          `${r.hit_p99} ms (p50 ${r.hit_p50} ms, ${r.hits} hits; L1 hits p99 ${r.l1_hit_p99} ms, ` +
          `Redis hits ${r.store_hits}, p99 ${r.store_hit_p99} ms)` +
          refs((x) => `${x.hit_p99} ms`),
      },
    ])
    .map((t) => ({ id: 'l1-hotset', ...t }));
}
