/*
 * The hotset scenario of bench:stampede: Zipf-popular keys at a steady rate on a private
 * redis-server (INFO commandstats counts only this run's commands), the library pattern beside
 * `singleflight`, measured in the same run.
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

// --- hotset -------------------------------------------------------------------------------

export interface HotsetRow {
  pattern: PatternName;
  instances: number;
  keys: number;
  zipf: number;
  rate: number;
  ttl_ms: number;
  backend_ms: number;
  duration_ms: number;
  reqs: number;
  loads: number;
  blocking_pct: number;
  early_recomputes: number;
  lock_waits: number;
  /** Library commands of the measured run (commandstats, script-internal commands included). */
  cmds: number;
  cmds_per_req: number;
  /** Store reads that found a value (estimated from the metrics, see hitReads). */
  hit_reads: number;
  /** (cmds - hit_reads x cmds_per_hit) / loads. */
  cmds_per_load: number;
  /** Probe: a sweep of warm keys, every call a hit: commands / store reads. */
  cmds_per_hit: number;
  /** Probe: a sweep of cold keys, every call a miss and a load: commands / loads. */
  cmds_per_cold_load: number;
  /** Loads per key per TTL, averaged over the hottest keys, and the most for one key. */
  hot_keys: number;
  loads_per_hot_key_per_ttl: number;
  max_loads_key_per_ttl: number;
  double_refreshes: number;
  p50: number;
  p99: number;
  store_errors: number;
  commands: CommandCounts;
}

export const HOTSET_COLUMNS: Column<HotsetRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'inst', value: (r) => r.instances },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads', value: (r) => r.loads },
  { header: 'blocking%', value: (r) => `${r.blocking_pct.toFixed(2)}%` },
  { header: 'early', value: (r) => r.early_recomputes },
  { header: 'lock_waits', value: (r) => r.lock_waits },
  { header: 'cmds', value: (r) => r.cmds },
  { header: 'cmds/req', value: (r) => r.cmds_per_req, digits: 3 },
  { header: 'cmds/load', value: (r) => r.cmds_per_load, digits: 2 },
  { header: 'cmds/hit', value: (r) => r.cmds_per_hit, digits: 3 },
  { header: 'cmds/cold_load', value: (r) => r.cmds_per_cold_load, digits: 2 },
  { header: 'loads/key/ttl(top)', value: (r) => r.loads_per_hot_key_per_ttl, digits: 3 },
  { header: 'max_loads/key/ttl', value: (r) => r.max_loads_key_per_ttl, digits: 2 },
  { header: 'double_refresh', value: (r) => r.double_refreshes },
  { header: 'p50_ms', value: (r) => r.p50, digits: 2 },
  { header: 'p99_ms', value: (r) => r.p99, digits: 2 },
  { header: 'store_err', value: (r) => r.store_errors },
];

/**
 * Calls whose own store read found a value: flights (calls - joins) minus the flights that
 * missed, and each missed flight either loaded (loads - earlyRecomputes: early recomputations
 * load in the background, not in a flight) or waited for another holder's lock (lockWaits).
 * A flight that missed and joined an early recomputation already loading is counted as a hit
 * read (rare: the value expired during that load).
 */
function hitReads(c: {
  calls: number;
  joins: number;
  loads: number;
  earlyRecomputes: number;
  lockWaits: number;
}): number {
  const missFlights = Math.max(0, c.loads - c.earlyRecomputes) + c.lockWaits;
  return Math.max(0, c.calls - c.joins - missFlights);
}

export async function hotset(ctx: ScenarioContext): Promise<HotsetRow[]> {
  const o = ctx.opts;
  const k = Math.max(1, o.hotsetInstances);
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## hotset: ${redis.describe()}; ${o.hotsetKeys} keys, Zipf s=${o.hotsetZipf}, Poisson ${o.hotsetRate} req/s` +
      `${k > 1 ? ` over ${k} forked instances` : ' in this process'}, TTL ${o.hotsetTtlMs} ms, backend ${o.hotsetBackendMs} ms, ` +
      `${o.hotsetDurationMs} ms measured after ${o.hotsetWarmupMs} ms of warm-up; probes: ${o.hotsetProbeKeys} cold keys once (misses), then again (hits); ` +
      `commands from INFO commandstats (commands inside scripts included)`,
  );
  const instances = await startInstances(
    ctx.config(o.hotsetTtlMs, {
      redisUrl: redis.url,
      backendMs: o.hotsetBackendMs,
      recordLoads: true,
      operationTimeout: o.operationTimeoutMs,
      cooldown: o.cooldownMs,
    }),
    k,
  );
  const rows: HotsetRow[] = [];
  const hot = Math.min(o.hotsetHotKeys, o.hotsetKeys);
  try {
    for (const pattern of o.hotsetPatterns) {
      const probe: LoadJob = {
        pattern,
        keyPrefix: `hs-probe:${pattern}:`,
        keys: o.hotsetProbeKeys,
        zipf: 0,
        mode: 'sweep',
        concurrency: 20,
      };
      // Load the scripts (EVALSHA's first NOSCRIPT + EVAL) before anything is counted.
      await instances[0].load({ ...probe, keyPrefix: `hs-prime:${pattern}:`, keys: 1 });
      const s0 = await redis.commandCounts();
      const cold = await instances[0].load(probe);
      const s1 = await redis.commandCounts();
      const warm = await instances[0].load(probe);
      const s2 = await redis.commandCounts();
      const coldCmds = totalCommands(commandDelta(s1, s0));
      const warmCmds = totalCommands(commandDelta(s2, s1));
      const warmReads = hitReads(warm.counters);
      const cmdsPerHit = warmReads > 0 ? warmCmds / warmReads : NaN;

      const job: LoadJob = {
        pattern,
        keyPrefix: `hs:${pattern}:`,
        keys: o.hotsetKeys,
        zipf: o.hotsetZipf,
        mode: 'poisson',
        rate: o.hotsetRate / k,
        durationMs: o.hotsetWarmupMs,
      };
      const run = await warmAndMeasure(instances, redis, job, o.hotsetDurationMs, {
        perRequest: true,
      });
      const { results, commands, cmds, reqs, loads, perKey } = run;
      const c = run.counters;
      const reads = hitReads(c);
      const ttls = o.hotsetDurationMs / o.hotsetTtlMs;
      let hotLoads = 0;
      for (let r = 0; r < hot; r++) hotLoads += perKey.get(`${job.keyPrefix}${r}`) ?? 0;
      const latencies = results.flatMap((r) => r.latencies ?? []);
      rows.push({
        pattern,
        instances: k,
        keys: o.hotsetKeys,
        zipf: o.hotsetZipf,
        rate: o.hotsetRate,
        ttl_ms: o.hotsetTtlMs,
        backend_ms: o.hotsetBackendMs,
        duration_ms: o.hotsetDurationMs,
        reqs,
        loads: c.loads,
        blocking_pct: c.calls ? (100 * c.misses) / c.calls : 0,
        early_recomputes: c.earlyRecomputes,
        lock_waits: c.lockWaits,
        cmds,
        cmds_per_req: cmds / reqs,
        hit_reads: reads,
        cmds_per_load: c.loads ? (cmds - reads * (cmdsPerHit || 1)) / c.loads : NaN,
        cmds_per_hit: cmdsPerHit,
        cmds_per_cold_load: cold.counters.loads ? coldCmds / cold.counters.loads : NaN,
        hot_keys: hot,
        loads_per_hot_key_per_ttl: hotLoads / hot / ttls,
        max_loads_key_per_ttl: Math.max(0, ...perKey.values()) / ttls,
        double_refreshes: doubleRefreshes(loads, o.hotsetTtlMs / 2),
        p50: q(latencies, 0.5),
        p99: q(latencies, 0.99),
        store_errors: c.storeErrors + cold.counters.storeErrors + warm.counters.storeErrors,
        commands,
      });
    }
  } finally {
    await Promise.all(instances.map((i) => i.close()));
    await redis.stop();
  }
  ctx.log(renderTable(HOTSET_COLUMNS, rows));
  ctx.log(
    `\nhotset: commandstats of the measured run by command (calls; commands inside scripts counted under their own name)`,
  );
  ctx.log(
    renderCommandBreakdown(
      rows.map((r) => ({
        name: r.pattern,
        commands: r.commands,
        cmds: r.cmds,
        perRequest: r.cmds_per_req,
        perLoad: r.cmds_per_load,
      })),
    ),
  );
  logTargets(ctx, hotsetTargets(rows));
  return rows;
}

export function hotsetTargets(rows: HotsetRow[]): Target[] {
  const sf = rows.find((r) => r.pattern === 'singleflight');
  const ref = (f: (r: HotsetRow) => string) => (sf ? ` (singleflight ${f(sf)})` : '');
  const targets: Target[] = [];
  for (const r of rows.filter((x) => x.pattern !== 'singleflight')) {
    targets.push(
      {
        id: 'hotset',
        text: `${r.pattern}: <= 4 Redis commands per load, lock included`,
        met: r.cmds_per_load <= 4,
        measured: `${r.cmds_per_load.toFixed(2)} (cold-key probe ${r.cmds_per_cold_load.toFixed(2)})${ref((s) => s.cmds_per_load.toFixed(2))}`,
      },
      {
        id: 'hotset',
        text: `${r.pattern}: exactly 1 Redis command per hit`,
        met: Math.abs(r.cmds_per_hit - 1) < 1e-9,
        measured: `${r.cmds_per_hit.toFixed(3)}${ref((s) => s.cmds_per_hit.toFixed(3))}`,
      },
      {
        id: 'hotset',
        text: `${r.pattern}: <= 2.2 Redis commands per request`,
        met: r.cmds_per_req <= 2.2,
        measured: `${r.cmds_per_req.toFixed(3)}${ref((s) => s.cmds_per_req.toFixed(3))}`,
      },
      {
        id: 'hotset',
        text: `${r.pattern}: <= 1 load per key per TTL (top ${r.hot_keys} keys, tolerance 5%), no double refresh`,
        met: r.loads_per_hot_key_per_ttl <= 1.05 && r.double_refreshes === 0,
        measured: `${r.loads_per_hot_key_per_ttl.toFixed(3)}, max ${r.max_loads_key_per_ttl.toFixed(2)}, double ${r.double_refreshes}${ref((s) => s.loads_per_hot_key_per_ttl.toFixed(3))}`,
      },
    );
  }
  return targets;
}
