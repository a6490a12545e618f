/*
 * The hotset scenario of bench:stampede: Zipf-popular keys at a steady rate on a private
 * redis-server (INFO commandstats counts only this run's commands), the library pattern beside
 * `singleflight`, measured in the same run; and what it shares with l1-hotset.
 */
import { columns } from '../shared/columns';
import type { PrivateRedis } from '../shared/private-redis';
import type { Target } from '../shared/targets';
import { PatternCounters, PatternName } from './patterns';
import {
  commandBreakdown,
  commandDelta,
  eachOf,
  q,
  runScenario,
  ScenarioContext,
  totalCommands,
} from './scenario';
import { Instance, withInstances } from './instances';
import { doubleRefreshes, LoadJob, warmAndMeasure, poissonJob } from './load';
import { group, Group } from './options';

type HotsetGroup = Omit<Group<'hotset'>, 'patterns' | 'instances' | 'backendMs'>;

/**
 * A hot-set run of `pattern` (hotset, l1-hotset), keys `${tag}:${name}:${rank}`. The probe
 * first: a sweep of `probeKeys` cold keys on instance 0 (every call a miss and a load), after
 * one key that loads the scripts (EVALSHA's first NOSCRIPT + EVAL) uncounted, then, with
 * `warm`, the same keys again (every call a hit); the commands of each sweep. Then the load,
 * warmed up and measured on every instance; the row fields both scenarios share.
 */
export async function hotsetRun(
  g: HotsetGroup,
  instances: Instance[],
  redis: PrivateRedis,
  pattern: PatternName,
  [tag, name]: [string, string],
  warm: boolean,
  measured: Partial<LoadJob>,
) {
  const k = instances.length;
  const job = poissonJob(pattern, `${tag}:${name}:`, g.keys, g.rate / k, g.warmupMs, g.zipf);
  const probe = (keyPrefix: string, keys = g.probeKeys) =>
    instances[0].load({ ...job, keyPrefix, keys, mode: 'sweep', concurrency: 20 });
  await probe(`${tag}-prime:${name}:`, 1);
  const sweep = async () => {
    const before = await redis.commandCounts();
    const res = await probe(`${tag}-probe:${name}:`);
    return { res, cmds: totalCommands(commandDelta(await redis.commandCounts(), before)) };
  };
  const cold = await sweep();
  const hot = warm ? await sweep() : undefined;
  const run = await warmAndMeasure(instances, redis, job, g.durationMs, measured);
  const { cmds, reqs } = run;
  // Loads per key per TTL of the `hot` most popular keys and of the busiest key.
  const hotKeys = Math.min(g.hotKeys, g.keys);
  const ttls = g.durationMs / g.ttlMs;
  let hotLoads = 0;
  for (let r = 0; r < hotKeys; r++) hotLoads += run.perKey.get(`${job.keyPrefix}${r}`) ?? 0;
  const row = {
    instances: k,
    keys: g.keys,
    zipf: g.zipf,
    rate: g.rate,
    ttl_ms: g.ttlMs,
    duration_ms: g.durationMs,
    reqs,
    loads: run.counters.loads,
    /** Library commands of the measured run (commandstats, script-internal commands included). */
    cmds,
    cmds_per_req: cmds / reqs,
    hot_keys: hotKeys,
    loads_per_hot_key_per_ttl: hotLoads / hotKeys / ttls,
    max_loads_key_per_ttl: Math.max(0, ...run.perKey.values()) / ttls,
    double_refreshes: doubleRefreshes(run.loads, g.ttlMs / 2),
  };
  return { cold, warm: hot, run, row };
}

/**
 * Calls whose own store read found a value: flights (calls - joins) minus the flights that
 * missed, and each missed flight either loaded (loads - earlyRecomputes: early recomputations
 * load in the background, not in a flight) or waited for another holder's lock (lockWaits).
 * A flight that missed and joined an early recomputation already loading is counted as a hit
 * read (rare: the value expired during that load).
 */
function hitReads(c: PatternCounters): number {
  const missFlights = Math.max(0, c.loads - c.earlyRecomputes) + c.lockWaits;
  return Math.max(0, c.calls - c.joins - missFlights);
}

export type HotsetRow = Awaited<ReturnType<typeof hotsetRow>>;

export const HOTSET_COLUMNS = columns<HotsetRow>(
  'pattern, inst=instances, reqs, loads, blocking%, early=early_recomputes, lock_waits, cmds, ' +
    'cmds/req=cmds_per_req:3, cmds/load=cmds_per_load:2, cmds/hit=cmds_per_hit:3, ' +
    'cmds/cold_load=cmds_per_cold_load:2, loads/key/ttl(top)=loads_per_hot_key_per_ttl:3, ' +
    'max_loads/key/ttl=max_loads_key_per_ttl:2, double_refresh=double_refreshes, ' +
    'p50_ms=p50:2, p99_ms=p99:2, store_err=store_errors',
  { 'blocking%': (r) => `${r.blocking_pct.toFixed(2)}%` },
);

async function hotsetRow(
  ctx: ScenarioContext,
  instances: Instance[],
  redis: PrivateRedis,
  pattern: PatternName,
) {
  const g = group(ctx.opts, 'hotset');
  const hs = await hotsetRun(g, instances, redis, pattern, ['hs', pattern], true, {
    perRequest: true,
  });
  const { cold, run } = hs;
  const warm = hs.warm!;
  const warmReads = hitReads(warm.res.counters);
  const cmdsPerHit = warmReads > 0 ? warm.cmds / warmReads : NaN;
  const { cmds, counters: c } = run;
  const reads = hitReads(c);
  const latencies = run.results.flatMap((r) => r.latencies ?? []);
  return {
    pattern,
    ...hs.row,
    backend_ms: g.backendMs,
    blocking_pct: c.calls ? (100 * c.misses) / c.calls : 0,
    early_recomputes: c.earlyRecomputes,
    lock_waits: c.lockWaits,
    /** Store reads that found a value (estimated from the metrics, see hitReads). */
    hit_reads: reads,
    cmds_per_load: c.loads ? (cmds - reads * (cmdsPerHit || 1)) / c.loads : NaN,
    /** Probes: commands per store read of warm keys, and per load of cold keys. */
    cmds_per_hit: cmdsPerHit,
    cmds_per_cold_load: cold.res.counters.loads ? cold.cmds / cold.res.counters.loads : NaN,
    p50: q(latencies, 0.5),
    p99: q(latencies, 0.99),
    store_errors: c.storeErrors + cold.res.counters.storeErrors + warm.res.counters.storeErrors,
    commands: run.commands,
  };
}

export function hotset(ctx: ScenarioContext) {
  const o = ctx.opts;
  const k = Math.max(1, o.hotsetInstances);
  return runScenario(ctx, {
    privateRedis: true,
    title: (redis) =>
      `hotset: ${redis.describe()}; ${o.hotsetKeys} keys, Zipf s=${o.hotsetZipf}, Poisson ${o.hotsetRate} req/s` +
      `${k > 1 ? ` over ${k} forked instances` : ' in this process'}, TTL ${o.hotsetTtlMs} ms, backend ${o.hotsetBackendMs} ms, ` +
      `${o.hotsetDurationMs} ms measured after ${o.hotsetWarmupMs} ms of warm-up; probes: ${o.hotsetProbeKeys} cold keys once (misses), then again (hits); ` +
      `commands from INFO commandstats (commands inside scripts included)`,
    rows: (redis) => {
      const extra = { backendMs: o.hotsetBackendMs, recordLoads: true };
      return withInstances(ctx.config(o.hotsetTtlMs, extra, redis), k, (instances) =>
        eachOf(o.hotsetPatterns, (p) => hotsetRow(ctx, instances, redis, p)),
      );
    },
    columns: HOTSET_COLUMNS,
    after: (rows) => commandBreakdown('hotset', rows, (r) => r.pattern, true),
    targets: hotsetTargets,
  });
}

function hotsetTargets(rows: HotsetRow[]): Target[] {
  const sf = rows.find((r) => r.pattern === 'singleflight');
  const ref = (f: (r: HotsetRow) => number, digits: number) =>
    sf ? ` (singleflight ${f(sf).toFixed(digits)})` : '';
  return rows
    .filter((x) => x.pattern !== 'singleflight')
    .flatMap((r) => [
      {
        text: `${r.pattern}: <= 4 Redis commands per load, lock included`,
        met: r.cmds_per_load <= 4,
        measured: `${r.cmds_per_load.toFixed(2)} (cold-key probe ${r.cmds_per_cold_load.toFixed(2)})${ref((s) => s.cmds_per_load, 2)}`,
      },
      {
        text: `${r.pattern}: exactly 1 Redis command per hit`,
        met: Math.abs(r.cmds_per_hit - 1) < 1e-9,
        measured: `${r.cmds_per_hit.toFixed(3)}${ref((s) => s.cmds_per_hit, 3)}`,
      },
      {
        text: `${r.pattern}: <= 2.2 Redis commands per request`,
        met: r.cmds_per_req <= 2.2,
        measured: `${r.cmds_per_req.toFixed(3)}${ref((s) => s.cmds_per_req, 3)}`,
      },
      {
        text: `${r.pattern}: <= 1 load per key per TTL (top ${r.hot_keys} keys, tolerance 5%), no double refresh`,
        met: r.loads_per_hot_key_per_ttl <= 1.05 && r.double_refreshes === 0,
        measured: `${r.loads_per_hot_key_per_ttl.toFixed(3)}, max ${r.max_loads_key_per_ttl.toFixed(2)}, double ${r.double_refreshes}${ref((s) => s.loads_per_hot_key_per_ttl, 3)}`,
      },
    ])
    .map((t) => ({ id: 'hotset', ...t }));
}
