/*
 * Open-loop load on many keys, run the same way in the parent's own app and in forked instances
 * (hotset, fanout, stall, warnings): Poisson arrivals with Zipf (or uniform) key popularity, or
 * a sweep that calls every key once. Times are epoch ms, so that instances can be merged.
 */
import { performance } from 'node:perf_hooks';
import { CommandCounts, commandDelta, totalCommands } from './scenario';
import { BenchApp } from './bench-app';
import {
  BackendError,
  CallRecord,
  callContext,
  diffCounters,
  PatternName,
  sumCounters,
} from './patterns';
import { PrivateRedis } from '../shared/private-redis';

export const epochNow = () => performance.timeOrigin + performance.now();

/** Exponential inter-arrival times: a Poisson process of `rate` per second over `durationMs`. */
function poissonArrivals(rate: number, durationMs: number): number[] {
  const out: number[] = [];
  for (let t = 0; ;) {
    t += (-Math.log(1 - Math.random()) / rate) * 1000;
    if (t >= durationMs) return out;
    out.push(t);
  }
}

/** A timed action `atMs` after the start of a drive (local runs only: CLIENT PAUSE). */
export type DriveEvent = { atMs: number; run: () => void };

/** Fires `fire(i)` at each arrival time (ms from now), checking the clock every millisecond. */
async function drive(
  arrivals: number[],
  fire: (i: number) => Promise<void>,
  events: DriveEvent[] = [],
): Promise<number> {
  const pending: Promise<void>[] = [];
  const start = performance.now();
  const todo = [...events].sort((a, b) => a.atMs - b.atMs);
  await new Promise<void>((resolve) => {
    let i = 0;
    const tick = () => {
      const now = performance.now() - start;
      while (todo.length && todo[0].atMs <= now) todo.shift()!.run();
      while (i < arrivals.length && arrivals[i] <= now) pending.push(fire(i++));
      if (i < arrivals.length) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
  await Promise.all(pending);
  return performance.now() - start;
}

/** Draws ranks 0..n-1 with probability proportional to 1 / (rank + 1)^s (s = 0: uniform). */
export function zipfSampler(n: number, s: number, random = Math.random): () => number {
  if (s === 0) return () => Math.floor(random() * n);
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let r = 0; r < n; r++) cdf[r] = sum += 1 / Math.pow(r + 1, s);
  return () => {
    const x = random() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid] < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

export interface LoadJob {
  pattern: PatternName;
  /** Keys are `${keyPrefix}${rank}`, rank 0 the most popular. */
  keyPrefix: string;
  keys: number;
  /** Zipf exponent of the key popularity; 0: uniform. */
  zipf: number;
  /**
   * 'poisson': `rate` req/s for `durationMs`; 'sweep': every key once, `concurrency` at a time,
   * or, with `spreadMs`, key i at i * spreadMs / keys (expiries spread over a TTL, not together).
   */
  mode: 'poisson' | 'sweep';
  rate?: number;
  durationMs?: number;
  concurrency?: number;
  spreadMs?: number;
  /** Epoch ms at which to start (instances start together). */
  startAt?: number;
  /** Return every request's arrival and latency (else only counts). */
  perRequest?: boolean;
  /**
   * Poisson mode: tell hits from misses in the caller: a hit is a call that did not run the
   * loader itself (CallRecord), did not wait for another holder's lock, and did not join a
   * single-flight whose leader did either.
   */
  classify?: boolean;
}

export type LoadResult = Awaited<ReturnType<typeof runLoad>>;

/** `rate` req/s for `durationMs` over keys `${keyPrefix}${rank}`, Zipf `zipf` (0: uniform). */
export function poissonJob(
  pattern: PatternName,
  keyPrefix: string,
  keys: number,
  rate: number,
  durationMs: number,
  zipf = 0,
): LoadJob {
  return { pattern, keyPrefix, keys, zipf, mode: 'poisson', rate, durationMs };
}

/** Runs one job against `app`. `events` (local runs only) fire at their time in the drive. */
export async function runLoad(app: BenchApp, job: LoadJob, events: DriveEvent[] = []) {
  const call = app.caller(job.pattern);
  const keyOf = (rank: number) => `${job.keyPrefix}${rank}`;
  if (job.startAt !== undefined) {
    const delay = job.startAt - Date.now();
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
  }
  const c0 = app.counters(job.pattern);
  const n0 = app.notificationsReceived();
  const cpu0 = process.cpuUsage();
  const log0 = app.backend.log.length;
  const seen = new Set<number>();
  let callerErrors = 0;
  const startedAt = epochNow();
  let reqs = job.keys;
  let wallMs: number;
  /**
   * perRequest: every request's arrival (epoch ms) and latency (ms). classify: latency of every
   * hit served by the in-process tier (library L1 or bento-like's), and of every other hit (a
   * store read, or a join of a flight that read it); calls that ran the loader, that waited for
   * another holder's lock (its load), and that joined a flight that did either.
   */
  let extra: {
    arrivals?: number[];
    latencies?: number[];
    l1HitLatencies?: number[];
    storeHitLatencies?: number[];
    ranLoad?: number;
    joinedLoad?: number;
    waitedLock?: number;
  } = {};
  const onError = (err: unknown) => {
    callerErrors++;
    if (err instanceof BackendError) seen.add(err.id);
  };
  if (job.mode === 'sweep' && job.spreadMs) {
    const times = Array.from({ length: reqs }, (_, i) => (i * job.spreadMs!) / reqs);
    wallMs = await drive(times, (i) => call(keyOf(i)).then(() => undefined, onError), events);
  } else if (job.mode === 'sweep') {
    let next = 0;
    const t0 = performance.now();
    const worker = async () => {
      while (next < reqs) await call(keyOf(next++)).catch(onError);
    };
    await Promise.all(Array.from({ length: Math.min(job.concurrency ?? 50, reqs) }, worker));
    wallMs = performance.now() - t0;
  } else {
    const times = poissonArrivals(job.rate ?? 1000, job.durationMs ?? 1000);
    const pick = zipfSampler(job.keys, job.zipf);
    const ranks = times.map(() => pick());
    reqs = times.length;
    const lat = new Array<number>(reqs);
    const live = job.classify ? app.liveCounters(job.pattern) : undefined;
    if (job.classify) app.watchLockWaits();
    const l1Hits: number[] = [];
    const storeHits: number[] = [];
    const counts = { ranLoad: 0, joinedLoad: 0, waitedLock: 0 };
    /** Per key, the record of the call that leads the single-flight in progress here. */
    const leaders = new Map<string, CallRecord>();
    const plain = (i: number) => {
      const t0 = performance.now();
      const done = () => void (lat[i] = performance.now() - t0);
      return call(keyOf(ranks[i])).then(done, (err: unknown) => (done(), onError(err)));
    };
    // The library counts a join and an L1 hit before the call's first await, so reading its
    // live counters around the synchronous start of the call tells which of them it was. A call
    // that starts a flight leads it; a joiner waited for what its leader waited for.
    const classify = (i: number) => {
      const record: CallRecord = {};
      const key = keyOf(ranks[i]);
      const joins0 = live?.joins ?? 0;
      const l1Hits0 = live?.l1Hits ?? 0;
      const t0 = performance.now();
      const pending = callContext.run(record, () => call(key));
      const didJoin = (live?.joins ?? 0) > joins0;
      const fromL1 = (live?.l1Hits ?? 0) > l1Hits0;
      const leader = didJoin ? leaders.get(key) : undefined;
      if (!didJoin && !fromL1) leaders.set(key, record);
      const settle = () => {
        if (leaders.get(key) === record) leaders.delete(key);
        return (lat[i] = performance.now() - t0);
      };
      const done = () => {
        const l = settle();
        if (record.loadEnd !== undefined) counts.ranLoad++;
        else if (record.lockWait) counts.waitedLock++;
        else if (didJoin && (!leader || leader.loadEnd !== undefined || leader.lockWait))
          counts.joinedLoad++;
        else (fromL1 ? l1Hits : storeHits).push(l);
      };
      return pending.then(done, (err: unknown) => (settle(), onError(err)));
    };
    // Classified calls start each in its own macrotask, as a server gets each request in its
    // own I/O callback: the microtasks of one call (all of an L1 hit) run before the next call
    // starts, so a hit's latency is its own and not the synchronous work of the other arrivals
    // of the same timer tick.
    const own = (i: number) =>
      new Promise<void>((resolve) => setImmediate(() => resolve(classify(i))));
    wallMs = await drive(times, job.classify ? own : plain, events);
    if (job.classify) extra = { l1HitLatencies: l1Hits, storeHitLatencies: storeHits, ...counts };
    if (job.perRequest)
      extra = { ...extra, arrivals: times.map((t) => startedAt + t), latencies: lat };
  }
  const n1 = app.notificationsReceived();
  const cpu = process.cpuUsage(cpu0);
  return {
    reqs,
    /** Peak resident set size of the process running the load, since it started (KB). */
    maxRssKb: process.resourceUsage().maxRSS,
    /** Epoch ms of the first arrival slot. */
    startedAt,
    wallMs,
    counters: diffCounters(app.counters(job.pattern), c0),
    /** Per loader call started during the run (cfg.recordLoads): key and epoch ms. */
    loads: app.backend.log
      .slice(log0)
      .map((r): [string, number] => [r.key, performance.timeOrigin + r.at]),
    /** Calls that rejected (a failing loader), and the ids of the BackendErrors they saw. */
    callerErrors,
    errorIdsSeen: [...seen],
    /** Fill notifications the store received during the run (null: the library has no counter). */
    notifications: n0 === undefined || n1 === undefined ? null : n1 - n0,
    /** CPU time (user + system, ms) of the process during the run, load generator included. */
    cpuMs: (cpu.user + cpu.system) / 1000,
    ...extra,
  };
}

/**
 * Loads of one key that started less than `gapMs` after the previous load of that key: a key
 * recomputed twice for one expiry. `loads` as in LoadResult, from any number of instances.
 */
export function doubleRefreshes(loads: [string, number][], gapMs: number): number {
  const byKey = new Map<string, number[]>();
  for (const [key, at] of loads) (byKey.get(key) ?? byKey.set(key, []).get(key)!).push(at);
  let doubles = 0;
  for (const list of byKey.values()) {
    list.sort((a, b) => a - b);
    for (let i = 1; i < list.length; i++) if (list[i] - list[i - 1] < gapMs) doubles++;
  }
  return doubles;
}

/**
 * Runs `job` on every instance for its `durationMs` (warm-up), then again for `durationMs`
 * with `measured` options, counting the Redis commands of the second run only.
 */
export async function warmAndMeasure(
  instances: { load(job: LoadJob): Promise<LoadResult> }[],
  redis: Pick<PrivateRedis, 'commandCounts'>,
  job: LoadJob,
  durationMs: number,
  measured: Partial<LoadJob>,
) {
  await Promise.all(instances.map((i) => i.load({ ...job, startAt: Date.now() + 50 })));
  const before = await redis.commandCounts();
  const startAt = Date.now() + 50;
  const results = await Promise.all(
    instances.map((i) => i.load({ ...job, durationMs, startAt, ...measured })),
  );
  const commands: CommandCounts = commandDelta(await redis.commandCounts(), before);
  const loads = results.flatMap((r) => r.loads);
  const perKey = new Map<string, number>();
  for (const [key] of loads) perKey.set(key, (perKey.get(key) ?? 0) + 1);
  return {
    results,
    commands,
    cmds: totalCommands(commands),
    counters: sumCounters(results.map((r) => r.counters)),
    reqs: results.reduce((a, r) => a + r.reqs, 0),
    loads,
    /** Loader calls per key during the measured run. */
    perKey,
  };
}
