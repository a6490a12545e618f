/*
 * The cliff scenario of bench:stampede (the article's experiment): N callers of one key at the
 * moment its value expires, round after round, in one instance or several forked ones.
 */
import { performance } from 'node:perf_hooks';
import { columns } from '../shared/columns';
import type { Target } from '../shared/targets';
import type { BenchOptions } from './options';
import { counters, lockKey, PatternName, sumCounters, valueKey } from './patterns';
import { commandsSoFar, eachOf, q, round2, runScenario, ScenarioContext, sleep } from './scenario';
import { Instance, withInstances } from './instances';

export type CliffRow = Awaited<ReturnType<typeof cliffRow>>;

export const CLIFF_COLUMNS = columns<CliffRow>(
  'pattern, inst=instances, conc, reqs, db_calls, stampede%, p50_ms=p50:2, p99_ms=p99:2, ' +
    'p999_ms=p999:2, rps:1, lock_contention_ms:1, redis_cmds_per_req:3, store_err=store_errors',
  { 'stampede%': (r) => `${r.stampede_pct.toFixed(2)}%` },
);

/**
 * The cliff scenario: 1 instance (`--instances` with --scenario cliff), then, beside other
 * scenarios, the `multiInstances` run.
 */
export async function cliffScenario(ctx: ScenarioContext) {
  const o = ctx.opts;
  const rows = await cliff(ctx, o.scenario === 'cliff' ? o.instances : 1, o.concurrency);
  if (o.scenario !== 'cliff' && o.multiInstances > 1)
    rows.push(...(await cliff(ctx, o.multiInstances, o.multiConcurrency)));
  ctx.targets.push(...cliffTargets(rows, o));
  return rows;
}

/** The cliff at every concurrency on `k` instances. */
function cliff(ctx: ScenarioContext, k: number, concurrencies: number[]) {
  const o = ctx.opts;
  return runScenario(ctx, {
    title: () =>
      `cliff: ${k} instance${k > 1 ? 's (forked processes)' : ' (this process)'}, TTL ${o.ttlMs} ms, backend ${o.backendMs} ms, ` +
      `${o.rounds} rounds + ${o.warmup} warm-up, lock ttl ${o.lockTtlMs} ms, poll ${o.pollMs} ms, beta ${o.beta}`,
    rows: () =>
      withInstances(ctx.config(o.ttlMs), k, (instances) => {
        const runs = concurrencies.flatMap((c) => o.cliffPatterns.map((p) => [p, c] as const));
        return eachOf(runs, ([pattern, conc]) => cliffRow(ctx, instances, pattern, conc));
      }),
    columns: CLIFF_COLUMNS,
  });
}

/** Waits until the key's value and lock are gone (the value expired after its TTL). */
async function waitExpired(ctx: ScenarioContext, key: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await ctx.control.exists(valueKey(ctx.prefix, key), lockKey(ctx.prefix, key))) > 0) {
    if (Date.now() > deadline) throw new Error(`key ${key} did not expire`);
    await sleep(2);
  }
}

async function cliffRow(
  ctx: ScenarioContext,
  instances: Instance[],
  pattern: PatternName,
  conc: number,
) {
  const o = ctx.opts;
  const k = instances.length;
  const key = `cliff:${pattern}:i${k}:c${conc}`;
  const share = (i: number) => Math.floor(conc / k) + (i < conc % k ? 1 : 0);
  const latencies: number[] = [];
  const perRound: number[] = [];
  let total = counters();
  let cmds = 0;
  let wallMs = 0;
  for (let r = 0; r < o.warmup + o.rounds; r++) {
    const roundStart = performance.now();
    if (r > 0) await sleep(o.ttlMs);
    await waitExpired(ctx, key);
    const before = await commandsSoFar(ctx.control);
    const startAt = Date.now() + (k > 1 ? 30 : 0);
    const results = await Promise.all(
      instances.map((inst, i) => inst.round({ pattern, key, n: share(i), startAt })),
    );
    const after = await commandsSoFar(ctx.control);
    if (r < o.warmup) continue;
    wallMs += performance.now() - roundStart;
    cmds += after - before;
    const round = sumCounters(results.map((res) => res.counters));
    latencies.push(...results.flatMap((res) => res.latencies));
    perRound.push(round.loads);
    total = sumCounters([total, round]);
  }
  const reqs = latencies.length;
  return {
    pattern,
    instances: k,
    conc,
    reqs,
    db_calls: total.loads,
    db_calls_per_round: perRound,
    /** The article's definition: requests that reached the backend, in % of requests. */
    stampede_pct: (100 * total.loads) / reqs,
    p50: q(latencies, 0.5),
    p99: q(latencies, 0.99),
    p999: q(latencies, 0.999),
    /** Requests per second of wall time, expiry waits between rounds included (as in the article). */
    rps: round2(reqs / (wallMs / 1000)),
    lock_contention_ms: round2(total.lockWaitMs),
    redis_cmds: cmds,
    redis_cmds_per_req: cmds / reqs,
    store_errors: total.storeErrors,
  };
}

const PROTECTED = ['singleflight', 'xfetch', 'distlock-poll', 'distlock', 'two-tier'];

/** Targets 1 and 2 of "What the library must reach": loader calls and Redis commands per request. */
function cliffTargets(rows: CliffRow[], o: BenchOptions): Target[] {
  const rounds = o.rounds;
  const targets: Target[] = [];
  const cliff = (pattern: PatternName, k: number, conc: number) =>
    rows.find((r) => r.pattern === pattern && r.instances === k && r.conc === conc);
  const unique = (xs: number[]) => [...new Set(xs)];

  const single = rows.filter((r) => r.instances === 1 && PROTECTED.includes(r.pattern));
  if (single.length) {
    const bad = single.filter((r) => r.db_calls !== rounds);
    targets.push({
      id: '1a',
      text: `every protected pattern: db_calls = ${rounds} at every concurrency (1 instance)`,
      met: bad.length === 0,
      measured: bad.length
        ? bad.map((r) => `${r.pattern}@${r.conc}=${r.db_calls}`).join(', ')
        : 'all equal',
    });
  }
  const multi = unique(rows.filter((r) => r.instances > 1).map((r) => r.instances));
  for (const k of multi) {
    for (const conc of unique(rows.filter((r) => r.instances === k).map((r) => r.conc))) {
      const want: [PatternName, number][] = [
        ['distlock', rounds],
        ['two-tier', rounds],
        ['singleflight', k * rounds],
      ];
      const got = want
        .map(([p, w]) => [p, w, cliff(p, k, conc)?.db_calls] as const)
        .filter(([, , g]) => g !== undefined);
      if (got.length)
        targets.push({
          id: '1b',
          text: `--instances ${k} at conc ${conc}: distlock and two-tier db_calls = ${rounds}, singleflight = ${k * rounds}`,
          met: got.every(([, w, g]) => g === w),
          measured: got.map(([p, , g]) => `${p}=${g}`).join(', '),
        });
    }
  }
  for (const k of [1, ...multi]) {
    const conc = Math.max(0, ...rows.filter((r) => r.instances === k).map((r) => r.conc));
    const tt = cliff('two-tier', k, conc);
    if (!tt) continue;
    const at = `two-tier, ${k} instance(s), conc ${conc}:`;
    const poll = cliff('distlock-poll', k, conc);
    targets.push({
      id: '2a',
      text: `${at} <= 1.1 Redis commands per request`,
      met: tt.redis_cmds_per_req <= 1.1,
      measured: `${tt.redis_cmds_per_req.toFixed(3)} (distlock-poll: ${poll?.redis_cmds_per_req.toFixed(2) ?? '-'})`,
    });
    const sf = cliff('singleflight', k, conc);
    if (sf)
      targets.push({
        id: '2b',
        text: `${at} p99 within 10% of singleflight's`,
        met: tt.p99 <= sf.p99 * 1.1,
        measured: `two-tier ${tt.p99} ms vs singleflight ${sf.p99} ms (${((100 * (tt.p99 - sf.p99)) / sf.p99).toFixed(1)}%)`,
      });
    if (poll) {
      const ratio =
        tt.lock_contention_ms > 0 ? poll.lock_contention_ms / tt.lock_contention_ms : Infinity;
      targets.push({
        id: '2c',
        text: `${at} lock_contention_ms >= 100x lower than distlock-poll's`,
        met: ratio >= 100,
        measured: `${tt.lock_contention_ms} ms vs ${poll.lock_contention_ms} ms (${Number.isFinite(ratio) ? `${ratio.toFixed(0)}x` : 'two-tier 0'})`,
      });
    }
  }
  return targets;
}
