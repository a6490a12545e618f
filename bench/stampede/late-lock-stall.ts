/*
 * The resilience scenarios of bench:stampede that pause Redis (CLIENT PAUSE on a private
 * redis-server, never the shared one): late-lock (a lock attempt delayed past its TTL) and stall
 * (Redis paused while requests keep coming). Each table shows the library pattern beside
 * `singleflight`, measured in the same run.
 */
import { performance } from 'node:perf_hooks';
import { PrivateRedis } from '../shared/private-redis';
import { Column, renderTable } from '../shared/table';
import type { Target } from '../shared/targets';
import { BenchApp } from './bench-app';
import { LOCK_PATTERNS, XFETCH_LOCK_PATTERNS, lockKey, PatternName, valueKey } from './patterns';
import { epochNow, logTargets, q, round2, ScenarioContext, sleep } from './context';
import { LoadJob, runLoad } from './load';
import type { BenchOptions } from './options';

// --- late-lock ----------------------------------------------------------------------------

export interface LateLockRow {
  pattern: PatternName;
  /** The lock attempt that the pause delays: read-or-lock (a miss), try-lock (XFetch), or none. */
  path: 'no lock' | 'read-or-lock' | 'try-lock';
  pause: string;
  /** The call during the pause (ms), and its store errors (the timed-out attempt). */
  call1_ms: number;
  call1_store_errors: number;
  /** After the pause and the cool-down: the lock key still there (EXISTS), its PTTL. */
  lock_left: number;
  lock_pttl_ms: number | null;
  /** The next call on the key (a miss: its value was never stored, or deleted for try-lock). */
  call2_ms: number;
  call2_loads: number;
  lock_waits: number;
  lock_wait_ms: number;
}

export const LATE_LOCK_COLUMNS: Column<LateLockRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'lock_path', value: (r) => r.path },
  { header: 'pause', value: (r) => r.pause },
  { header: 'call1_ms', value: (r) => r.call1_ms, digits: 1 },
  { header: 'call1_store_err', value: (r) => r.call1_store_errors },
  { header: 'lock_left', value: (r) => r.lock_left },
  { header: 'lock_pttl_ms', value: (r) => r.lock_pttl_ms },
  { header: 'call2_ms', value: (r) => r.call2_ms, digits: 1 },
  { header: 'call2_loads', value: (r) => r.call2_loads },
  { header: 'lock_waits', value: (r) => r.lock_waits },
  { header: 'lock_wait_ms', value: (r) => r.lock_wait_ms, digits: 1 },
];

export async function lateLock(ctx: ScenarioContext): Promise<LateLockRow[]> {
  const o = ctx.opts;
  const redis = await PrivateRedis.start();
  const ttl = 10_000;
  ctx.log(
    `\n## late-lock: ${redis.describe()}; CLIENT PAUSE ${o.latePauseMs} WRITE, one call (its lock attempt times out after ` +
      `operationTimeout ${o.operationTimeoutMs} ms), wait for the pause + cooldown ${o.cooldownMs} ms, then the next call on the key; ` +
      `TTL ${ttl} ms, backend ${o.backendMs} ms, lock ttl ${o.lockTtlMs} ms`,
  );
  const app = await BenchApp.create(
    ctx.config(ttl, {
      redisUrl: redis.url,
      operationTimeout: o.operationTimeoutMs,
      cooldown: o.cooldownMs,
    }),
  );
  const rows: LateLockRow[] = [];
  try {
    for (const pattern of o.latePatterns) {
      const path = LOCK_PATTERNS.includes(pattern) ? 'read-or-lock' : 'no lock';
      rows.push(await lateLockRow(ctx, app, redis, pattern, path));
      if (XFETCH_LOCK_PATTERNS.includes(pattern))
        rows.push(await lateLockRow(ctx, app, redis, pattern, 'try-lock'));
    }
  } finally {
    await app.close();
    await redis.stop();
  }
  ctx.log(renderTable(LATE_LOCK_COLUMNS, rows));
  logTargets(ctx, lateLockTargets(rows, o));
  return rows;
}

async function lateLockRow(
  ctx: ScenarioContext,
  app: BenchApp,
  redis: PrivateRedis,
  pattern: PatternName,
  path: LateLockRow['path'],
): Promise<LateLockRow> {
  const o = ctx.opts;
  const key = `late:${path === 'try-lock' ? 'try:' : ''}${pattern}`;
  const vKey = valueKey(ctx.prefix, key);
  const lKey = lockKey(ctx.prefix, key);
  const call = app.caller(pattern);
  if (path === 'try-lock') {
    // A value whose recorded load time is huge: the first XFetch draw fires (probability
    // 1 - 1e-5), so the call during the pause starts an early recomputation and its try-lock.
    const envelope = { v: 'seed', d: 1e9, e: Date.now() + 10_000 };
    await redis.control.set(vKey, JSON.stringify(envelope), 'PX', 10_000);
  }
  const c0 = app.counters(pattern);
  const pausedAt = performance.now();
  await redis.pause(o.latePauseMs, 'WRITE');
  let t = performance.now();
  await call(key);
  const call1 = performance.now() - t;
  const c1 = app.counters(pattern);
  const until = pausedAt + o.latePauseMs + o.cooldownMs + 50;
  await sleep(Math.max(0, until - performance.now()));
  const lockLeft = await redis.control.exists(lKey);
  const pttl = lockLeft ? await redis.control.pttl(lKey) : null;
  // try-lock: the value is still cached; drop it, as its expiry would, so the next call misses
  // and competes for the lock (and would wait on a lock left behind).
  if (path === 'try-lock') await redis.control.del(vKey);
  t = performance.now();
  await call(key);
  const call2 = performance.now() - t;
  const c2 = app.counters(pattern);
  return {
    pattern,
    path,
    pause: `WRITE ${o.latePauseMs} ms`,
    call1_ms: round2(call1),
    call1_store_errors: c1.storeErrors - c0.storeErrors,
    lock_left: lockLeft,
    lock_pttl_ms: pttl,
    call2_ms: round2(call2),
    call2_loads: c2.loads - c1.loads,
    lock_waits: c2.lockWaits - c1.lockWaits,
    lock_wait_ms: round2(c2.lockWaitMs - c1.lockWaitMs),
  };
}

export function lateLockTargets(rows: LateLockRow[], o: BenchOptions): Target[] {
  const sf = rows.find((r) => r.pattern === 'singleflight');
  const ref = sf ? `; singleflight ${sf.call2_ms} ms` : '';
  return rows
    .filter((r) => r.path !== 'no lock')
    .map((r) => ({
      id: 'late-lock',
      text: `${r.pattern} (${r.path}): after a timed-out lock attempt, next call <= backend + 100 ms (${o.backendMs + 100} ms), lockWaits 0, no lock left`,
      met: r.call2_ms <= o.backendMs + 100 && r.lock_waits === 0 && r.lock_left === 0,
      measured: `${r.call2_ms} ms, lockWaits ${r.lock_waits} (${r.lock_wait_ms} ms), lock_left ${r.lock_left}${ref}`,
    }));
}

// --- stall --------------------------------------------------------------------------------

export interface StallRow {
  pattern: PatternName;
  mode: 'ALL' | 'WRITE';
  pause_ms: number;
  keys: number;
  rate: number;
  reqs: number;
  /** Loader calls per second before, during and after the pause. */
  loads_per_s_before: number;
  loads_per_s_during: number;
  loads_per_s_after: number;
  /** during / before. */
  ratio: number;
  /** Requests that arrived during the pause, and their latency. */
  during_reqs: number;
  during_p50: number;
  during_p99: number;
  during_max: number;
  before_p99: number;
  store_errors: number;
}

export const STALL_COLUMNS: Column<StallRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'pause', value: (r) => `${r.mode} ${r.pause_ms} ms` },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads/s_before', value: (r) => r.loads_per_s_before, digits: 1 },
  { header: 'loads/s_during', value: (r) => r.loads_per_s_during, digits: 1 },
  { header: 'loads/s_after', value: (r) => r.loads_per_s_after, digits: 1 },
  { header: 'during/before', value: (r) => `${r.ratio.toFixed(2)}x` },
  { header: 'reqs_during', value: (r) => r.during_reqs },
  { header: 'p50_during_ms', value: (r) => r.during_p50, digits: 1 },
  { header: 'p99_during_ms', value: (r) => r.during_p99, digits: 1 },
  { header: 'max_during_ms', value: (r) => r.during_max, digits: 1 },
  { header: 'p99_before_ms', value: (r) => r.before_p99, digits: 1 },
  { header: 'store_err', value: (r) => r.store_errors },
];

export async function stall(ctx: ScenarioContext): Promise<StallRow[]> {
  const o = ctx.opts;
  const redis = await PrivateRedis.start();
  const pauseAt = Math.max(0, (o.stallDurationMs - o.stallPauseMs) / 2);
  ctx.log(
    `\n## stall: ${redis.describe()}; Poisson ${o.stallRate} req/s over ${o.stallKeys} keys (uniform), TTL ${o.stallTtlMs} ms, ` +
      `backend ${o.backendMs} ms, ${o.stallDurationMs} ms measured after a warm-up (keys loaded one by one over a TTL, then ${o.stallWarmupMs} ms of traffic); ` +
      `CLIENT PAUSE ${o.stallPauseMs} ${o.stallMode} at ${pauseAt} ms; operationTimeout ${o.operationTimeoutMs} ms, cooldown ${o.cooldownMs} ms`,
  );
  const app = await BenchApp.create(
    ctx.config(o.stallTtlMs, {
      redisUrl: redis.url,
      recordLoads: true,
      operationTimeout: o.operationTimeoutMs,
      cooldown: o.cooldownMs,
    }),
  );
  const rows: StallRow[] = [];
  try {
    for (const pattern of o.stallPatterns) {
      const job: LoadJob = {
        pattern,
        keyPrefix: `stall:${pattern}:`,
        keys: o.stallKeys,
        zipf: 0,
        mode: 'poisson',
        rate: o.stallRate,
        durationMs: o.stallWarmupMs,
      };
      // Warm-up: the keys loaded one after the other over one TTL (so they do not all expire
      // together), then the traffic itself.
      await runLoad(app, { ...job, mode: 'sweep', spreadMs: o.stallTtlMs });
      await runLoad(app, job);
      let pauseStart = Infinity;
      const res = await runLoad(app, { ...job, durationMs: o.stallDurationMs, perRequest: true }, [
        {
          atMs: pauseAt,
          run: () => {
            pauseStart = epochNow();
            redis.pause(o.stallPauseMs, o.stallMode).catch(() => undefined);
          },
        },
      ]);
      const pauseEnd = pauseStart + o.stallPauseMs;
      const end = res.startedAt + res.wallMs;
      const loadsIn = (from: number, to: number) =>
        res.loads.filter(([, at]) => at >= from && at < to).length /
        Math.max(1e-9, (to - from) / 1000);
      const before = loadsIn(res.startedAt, pauseStart);
      const during = loadsIn(pauseStart, pauseEnd);
      const after = loadsIn(pauseEnd, Math.min(end, res.startedAt + o.stallDurationMs));
      const lat = (from: number, to: number) =>
        res.latencies!.filter((_, i) => res.arrivals![i] >= from && res.arrivals![i] < to);
      const duringLat = lat(pauseStart, pauseEnd);
      rows.push({
        pattern,
        mode: o.stallMode,
        pause_ms: o.stallPauseMs,
        keys: o.stallKeys,
        rate: o.stallRate,
        reqs: res.reqs,
        loads_per_s_before: round2(before),
        loads_per_s_during: round2(during),
        loads_per_s_after: round2(after),
        ratio: before > 0 ? during / before : Infinity,
        during_reqs: duringLat.length,
        during_p50: q(duringLat, 0.5),
        during_p99: q(duringLat, 0.99),
        during_max: round2(Math.max(0, ...duringLat)),
        before_p99: q(lat(res.startedAt, pauseStart), 0.99),
        store_errors: res.counters.storeErrors,
      });
      // The next pattern starts on a store out of its cool-down.
      await sleep(o.cooldownMs + 100);
    }
  } finally {
    await app.close();
    await redis.stop();
  }
  ctx.log(renderTable(STALL_COLUMNS, rows));
  logTargets(ctx, stallTargets(rows, o));
  return rows;
}

/**
 * A timer never fires early, and a request that meets one timed-out Redis call and then one
 * load takes setTimeout(operationTimeout) + setTimeout(backend) plus the event loop's delay:
 * the p99 bound allows 10 ms of that on top of operationTimeout + backend.
 */
const TIMER_SLACK_MS = 10;

export function stallTargets(rows: StallRow[], o: BenchOptions): Target[] {
  const sf = rows.find((r) => r.pattern === 'singleflight');
  const bound = o.operationTimeoutMs + o.backendMs;
  return rows.map((r) => ({
    id: 'stall',
    text: `${r.pattern}: Redis paused (${r.mode}) ${r.pause_ms} ms: backend calls/s during <= 1.2x before, p99 of requests during <= operationTimeout + backend (${bound} ms, + ${TIMER_SLACK_MS} ms timer slack)`,
    met: r.ratio <= 1.2 && r.during_p99 <= bound + TIMER_SLACK_MS,
    measured:
      `${r.loads_per_s_during.toFixed(1)} vs ${r.loads_per_s_before.toFixed(1)}/s = ${r.ratio.toFixed(2)}x, p99 ${r.during_p99} ms` +
      (sf && sf !== r ? ` (singleflight ${sf.ratio.toFixed(2)}x, ${sf.during_p99} ms)` : ''),
  }));
}
