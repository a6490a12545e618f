/*
 * The resilience scenarios of bench:stampede that pause Redis (CLIENT PAUSE on a private
 * redis-server, never the shared one): late-lock (a lock attempt delayed past its TTL) and stall
 * (Redis paused while requests keep coming). Each table shows the library pattern beside
 * `singleflight`, measured in the same run.
 */
import { performance } from 'node:perf_hooks';
import { columns } from '../shared/columns';
import type { PrivateRedis } from '../shared/private-redis';
import type { Target } from '../shared/targets';
import { BenchApp } from './bench-app';
import {
  LOCK_PATTERNS,
  XFETCH_LOCK_PATTERNS,
  lockKey,
  MISS_LOCK_MARK,
  PatternName,
  valueKey,
} from './patterns';
import { eachOf, q, round2, runScenario, ScenarioContext, sleep } from './scenario';
import { epochNow, LoadJob, runLoad, poissonJob } from './load';
import type { BenchOptions } from './options';

// --- late-lock ----------------------------------------------------------------------------

export type LateLockRow = Awaited<ReturnType<typeof lateLockRow>>;

export const LATE_LOCK_COLUMNS = columns<LateLockRow>(
  'pattern, lock_path=path, pause, call1_ms:1, call1_store_err=call1_store_errors, lock_left, ' +
    'lock_pttl_ms, call2_ms:1, call2_loads, lock_waits, lock_wait_ms:1',
);

/** The lock attempt that the pause delays: read-or-lock (a miss), try-lock (XFetch), or none. */
type LockPath = 'no lock' | 'read-or-lock' | 'try-lock';

export function lateLock(ctx: ScenarioContext) {
  const o = ctx.opts;
  const ttl = 10_000;
  return runScenario(ctx, {
    privateRedis: true,
    title: (redis) =>
      `late-lock: ${redis.describe()}; CLIENT PAUSE ${o.latePauseMs} WRITE, one call (its lock attempt times out after ` +
      `operationTimeout ${o.operationTimeoutMs} ms), wait for the pause + cooldown ${o.cooldownMs} ms, then the next call on the key; ` +
      `TTL ${ttl} ms, backend ${o.backendMs} ms, lock ttl ${o.lockTtlMs} ms`,
    rows: (redis) =>
      BenchApp.with(ctx.config(ttl, {}, redis), async (app) => {
        const paths = o.latePatterns.map((p) => [
          [p, LOCK_PATTERNS.includes(p) ? 'read-or-lock' : 'no lock'] as const,
          ...(XFETCH_LOCK_PATTERNS.includes(p) ? [[p, 'try-lock'] as const] : []),
        ]);
        return eachOf(paths.flat(), ([p, path]) => lateLockRow(ctx, app, redis, p, path));
      }),
    columns: LATE_LOCK_COLUMNS,
    targets: (rows) => lateLockTargets(rows, o),
  });
}

async function lateLockRow(
  ctx: ScenarioContext,
  app: BenchApp,
  redis: PrivateRedis,
  pattern: PatternName,
  path: LockPath,
) {
  const o = ctx.opts;
  const key = `late:${path === 'try-lock' ? 'try:' : ''}${pattern}`;
  const vKey = valueKey(ctx.prefix, key);
  const lKey = lockKey(ctx.prefix, key);
  const call = app.caller(pattern);
  const timed = async () => {
    const t = performance.now();
    await call(key);
    return performance.now() - t;
  };
  if (path === 'try-lock') {
    // A value whose recorded load time is huge: the first XFetch draw fires (probability
    // 1 - 1e-5), so the call during the pause starts an early recomputation and its try-lock.
    const envelope = { v: 'seed', d: 1e9, e: Date.now() + 10_000 };
    await redis.control.set(vKey, JSON.stringify(envelope), 'PX', 10_000);
  }
  const c0 = app.counters(pattern);
  const pausedAt = performance.now();
  await redis.pause(o.latePauseMs, 'WRITE');
  const call1 = await timed();
  const c1 = app.counters(pattern);
  await sleep(Math.max(0, pausedAt + o.latePauseMs + o.cooldownMs + 50 - performance.now()));
  // A miss locks the value key itself (a lock mark), a refresh a key of its own.
  const held =
    path === 'read-or-lock'
      ? (await redis.control.get(vKey))?.startsWith(MISS_LOCK_MARK) === true
      : (await redis.control.exists(lKey)) === 1;
  const pttl = held ? await redis.control.pttl(path === 'read-or-lock' ? vKey : lKey) : null;
  // try-lock: the value is still cached; drop it, as its expiry would, so the next call misses
  // and competes for the lock (and would wait on a lock left behind).
  if (path === 'try-lock') await redis.control.del(vKey);
  const call2 = await timed();
  const c2 = app.counters(pattern);
  return {
    pattern,
    path,
    pause: `WRITE ${o.latePauseMs} ms`,
    /** The call during the pause, and its store errors (the timed-out attempt). */
    call1_ms: round2(call1),
    call1_store_errors: c1.storeErrors - c0.storeErrors,
    /** After the pause and the cool-down: the lock key still there (EXISTS), its PTTL. */
    lock_left: held ? 1 : 0,
    lock_pttl_ms: pttl,
    /** The next call on the key (a miss: its value was never stored, or deleted for try-lock). */
    call2_ms: round2(call2),
    call2_loads: c2.loads - c1.loads,
    lock_waits: c2.lockWaits - c1.lockWaits,
    lock_wait_ms: round2(c2.lockWaitMs - c1.lockWaitMs),
  };
}

function lateLockTargets(rows: LateLockRow[], o: BenchOptions): Target[] {
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

/** When the pause of a run starts: its middle (ms into the run). */
export const pauseAt = (durationMs: number, pauseMs: number) =>
  Math.max(0, (durationMs - pauseMs) / 2);

/**
 * Runs `job` (perRequest) with CLIENT PAUSE `pauseMs` `mode` in the middle of it; its loads
 * (count and per second) and latencies before and during the pause.
 */
export async function pausedRun(
  app: BenchApp,
  redis: PrivateRedis,
  job: LoadJob,
  pauseMs: number,
  mode: 'ALL' | 'WRITE',
) {
  const atMs = pauseAt(job.durationMs!, pauseMs);
  let start = Infinity;
  const pause = () => {
    start = epochNow();
    redis.pause(pauseMs, mode).catch(() => undefined);
  };
  const res = await runLoad(app, { ...job, perRequest: true }, [{ atMs, run: pause }]);
  const end = start + pauseMs;
  const loads = (from: number, to: number) =>
    res.loads.filter(([, at]) => at >= from && at < to).length;
  const rate = (from: number, to: number) => loads(from, to) / Math.max(1e-9, (to - from) / 1000);
  const lat = (from: number, to: number) =>
    res.latencies!.filter((_, i) => res.arrivals![i] >= from && res.arrivals![i] < to);
  const during = lat(start, end);
  return {
    res,
    start,
    end,
    loads,
    rate,
    /** Requests that arrived during the pause, and their latency; latency before it. */
    latency: {
      during_reqs: during.length,
      during_p50: q(during, 0.5),
      during_p99: q(during, 0.99),
      during_max: round2(Math.max(0, ...during)),
      before_p99: q(lat(res.startedAt, start), 0.99),
    },
  };
}

export type StallRow = Awaited<ReturnType<typeof stallRow>>;

export const STALL_COLUMNS = columns<StallRow>(
  'pattern, pause, reqs, loads/s_before=loads_per_s_before:1, loads/s_during=loads_per_s_during:1, ' +
    'loads/s_after=loads_per_s_after:1, during/before, reqs_during=during_reqs, ' +
    'p50_during_ms=during_p50:1, p99_during_ms=during_p99:1, max_during_ms=during_max:1, ' +
    'p99_before_ms=before_p99:1, store_err=store_errors',
  {
    pause: (r) => `${r.mode} ${r.pause_ms} ms`,
    'during/before': (r) => `${r.ratio.toFixed(2)}x`,
  },
);

async function stallRow(ctx: ScenarioContext, app: BenchApp, redis: PrivateRedis, p: PatternName) {
  const o = ctx.opts;
  const job = poissonJob(p, `stall:${p}:`, o.stallKeys, o.stallRate, o.stallWarmupMs);
  // Warm-up: the keys loaded one after the other over one TTL (so they do not all expire
  // together), then the traffic itself.
  await runLoad(app, { ...job, mode: 'sweep', spreadMs: o.stallTtlMs });
  await runLoad(app, job);
  const stalled = { ...job, durationMs: o.stallDurationMs };
  const run = await pausedRun(app, redis, stalled, o.stallPauseMs, o.stallMode);
  const { res, start, end, rate } = run;
  const before = rate(res.startedAt, start);
  const during = rate(start, end);
  // The next pattern starts on a store out of its cool-down.
  await sleep(o.cooldownMs + 100);
  return {
    pattern: p,
    mode: o.stallMode,
    pause_ms: o.stallPauseMs,
    keys: o.stallKeys,
    rate: o.stallRate,
    reqs: res.reqs,
    loads_per_s_before: round2(before),
    loads_per_s_during: round2(during),
    loads_per_s_after: round2(
      rate(end, Math.min(res.startedAt + res.wallMs, res.startedAt + o.stallDurationMs)),
    ),
    ratio: before > 0 ? during / before : Infinity,
    ...run.latency,
    store_errors: res.counters.storeErrors,
  };
}

export function stall(ctx: ScenarioContext) {
  const o = ctx.opts;
  return runScenario(ctx, {
    privateRedis: true,
    title: (redis) =>
      `stall: ${redis.describe()}; Poisson ${o.stallRate} req/s over ${o.stallKeys} keys (uniform), TTL ${o.stallTtlMs} ms, ` +
      `backend ${o.backendMs} ms, ${o.stallDurationMs} ms measured after a warm-up (keys loaded one by one over a TTL, then ${o.stallWarmupMs} ms of traffic); ` +
      `CLIENT PAUSE ${o.stallPauseMs} ${o.stallMode} at ${pauseAt(o.stallDurationMs, o.stallPauseMs)} ms; operationTimeout ${o.operationTimeoutMs} ms, cooldown ${o.cooldownMs} ms`,
    rows: (redis) =>
      BenchApp.with(ctx.config(o.stallTtlMs, { recordLoads: true }, redis), (app) =>
        eachOf(o.stallPatterns, (p) => stallRow(ctx, app, redis, p)),
      ),
    columns: STALL_COLUMNS,
    targets: (rows) => stallTargets(rows, o),
  });
}

/**
 * A timer never fires early, and a request that meets one timed-out Redis call and then one
 * load takes setTimeout(operationTimeout) + setTimeout(backend) plus the event loop's delay:
 * the p99 bound allows 10 ms of that on top of operationTimeout + backend.
 */
const TIMER_SLACK_MS = 10;

function stallTargets(rows: StallRow[], o: BenchOptions): Target[] {
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
