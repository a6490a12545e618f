/*
 * The fanout (several instances sharing keys) and warnings (a failing loader) scenarios of
 * bench:stampede; fanout runs on a private redis-server.
 */
import { ConsoleLogger, Logger, LogLevel } from '@nestjs/common';
import { PrivateRedis } from '../shared/private-redis';
import { Column, renderTable } from '../shared/table';
import type { Target } from '../shared/targets';
import { BenchApp } from './bench-app';
import { LOCK_PATTERNS, PatternName, sumCounters } from './patterns';
import { commandDelta } from './command-counts';
import { logTargets, q, round2, ScenarioContext, sleep } from './context';
import { startInstances } from './instances';
import { LoadJob, LoadResult, runLoad } from './load';

// --- fanout -------------------------------------------------------------------------------

export interface FanoutRow {
  pattern: PatternName;
  /** 1..K, or 'all' for the cluster. */
  instance: string;
  reqs: number;
  loads: number;
  lock_waits: number;
  lock_wait_ms: number;
  /** Fill notifications this instance's store received (null: the library has no counter). */
  notifications: number | null;
  /** 'all' only: PUBLISH commands on the server (fills and releases that notified). */
  publishes: number | null;
  p99: number;
}

export const FANOUT_COLUMNS: Column<FanoutRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'instance', value: (r) => r.instance },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads(fills)', value: (r) => r.loads },
  { header: 'lock_waits', value: (r) => r.lock_waits },
  { header: 'lock_wait_ms', value: (r) => r.lock_wait_ms, digits: 1 },
  { header: 'notifications_received', value: (r) => r.notifications ?? 'n/a' },
  {
    header: 'notif/lock_wait',
    value: (r) =>
      r.notifications === null
        ? 'n/a'
        : r.lock_waits > 0
          ? (r.notifications / r.lock_waits).toFixed(2)
          : r.notifications === 0
            ? '0'
            : 'inf',
  },
  { header: 'publishes', value: (r) => r.publishes },
  { header: 'p99_ms', value: (r) => r.p99, digits: 2 },
];

export async function fanout(ctx: ScenarioContext): Promise<FanoutRow[]> {
  const o = ctx.opts;
  const k = Math.max(2, o.fanoutInstances);
  const redis = await PrivateRedis.start();
  ctx.log(
    `\n## fanout: ${redis.describe()}; ${k} forked instances, ${o.fanoutKeys} keys, Zipf s=${o.fanoutZipf}, Poisson ${o.fanoutRate} req/s in all ` +
      `(${Math.round(o.fanoutRate / k)} per instance), TTL ${o.fanoutTtlMs} ms, backend ${o.fanoutBackendMs} ms, ${o.fanoutDurationMs} ms measured after ` +
      `${o.fanoutWarmupMs} ms of warm-up; notifications = the store's notificationsReceived`,
  );
  const instances = await startInstances(
    ctx.config(o.fanoutTtlMs, {
      redisUrl: redis.url,
      backendMs: o.fanoutBackendMs,
      operationTimeout: o.operationTimeoutMs,
      cooldown: o.cooldownMs,
    }),
    k,
  );
  const rows: FanoutRow[] = [];
  try {
    for (const pattern of o.fanoutPatterns) {
      const job: LoadJob = {
        pattern,
        keyPrefix: `fan:${pattern}:`,
        keys: o.fanoutKeys,
        zipf: o.fanoutZipf,
        mode: 'poisson',
        rate: o.fanoutRate / k,
        durationMs: o.fanoutWarmupMs,
      };
      await Promise.all(instances.map((i) => i.load({ ...job, startAt: Date.now() + 50 })));
      const s0 = await redis.commandCounts();
      const startAt = Date.now() + 50;
      const results: LoadResult[] = await Promise.all(
        instances.map((i) =>
          i.load({ ...job, durationMs: o.fanoutDurationMs, startAt, perRequest: true }),
        ),
      );
      const s1 = await redis.commandCounts();
      const row = (instance: string, list: LoadResult[]): FanoutRow => {
        const c = sumCounters(list.map((r) => r.counters));
        const notes = list.map((r) => r.notifications);
        return {
          pattern,
          instance,
          reqs: list.reduce((a, r) => a + r.reqs, 0),
          loads: c.loads,
          lock_waits: c.lockWaits,
          lock_wait_ms: round2(c.lockWaitMs),
          notifications: notes.some((n) => n === null)
            ? null
            : notes.reduce<number>((a, n) => a + (n ?? 0), 0),
          publishes: null,
          p99: q(
            list.flatMap((r) => r.latencies ?? []),
            0.99,
          ),
        };
      };
      results.forEach((r, i) => rows.push(row(String(i + 1), [r])));
      rows.push({ ...row('all', results), publishes: commandDelta(s1, s0).publish ?? 0 });
    }
  } finally {
    await Promise.all(instances.map((i) => i.close()));
    await redis.stop();
  }
  ctx.log(renderTable(FANOUT_COLUMNS, rows));
  logTargets(ctx, fanoutTargets(rows));
  return rows;
}

export function fanoutTargets(rows: FanoutRow[]): Target[] {
  const targets: Target[] = [];
  for (const pattern of [...new Set(rows.map((r) => r.pattern))]) {
    if (!LOCK_PATTERNS.includes(pattern)) continue;
    const per = rows.filter((r) => r.pattern === pattern && r.instance !== 'all');
    const all = rows.find((r) => r.pattern === pattern && r.instance === 'all')!;
    const text = `${pattern}: fill notifications received per instance <= its own lockWaits (+5% +5), not the cluster's fills`;
    if (per.some((r) => r.notifications === null)) {
      targets.push({
        id: 'fanout',
        text,
        met: null,
        measured: `n/a (this library has no RedisStore.notificationsReceived); cluster fills ${all.loads}, publishes ${all.publishes}`,
      });
      continue;
    }
    targets.push({
      id: 'fanout',
      text,
      met: per.every((r) => r.notifications! <= r.lock_waits * 1.05 + 5),
      measured:
        per.map((r) => `#${r.instance} ${r.notifications} vs ${r.lock_waits}`).join(', ') +
        `; cluster fills ${all.loads}, publishes ${all.publishes}`,
    });
  }
  return targets;
}

// --- warnings -----------------------------------------------------------------------------

/** Nest logger of the warnings scenario: keeps the library's lines instead of printing them. */
export class CaptureLogger extends ConsoleLogger {
  readonly lines: { level: LogLevel; context: string; message: string }[] = [];
  capturing = true;

  private keep(level: LogLevel, message: unknown, rest: unknown[]): boolean {
    if (!this.capturing) return false;
    const context = typeof rest[rest.length - 1] === 'string' ? String(rest[rest.length - 1]) : '';
    this.lines.push({ level, context, message: String(message) });
    return true;
  }

  override warn(message: unknown, ...rest: unknown[]): void {
    if (!this.keep('warn', message, rest)) super.warn(message, ...rest);
  }

  override error(message: unknown, ...rest: unknown[]): void {
    if (!this.keep('error', message, rest)) super.error(message, ...rest);
  }

  override log(message: unknown, ...rest: unknown[]): void {
    if (!this.capturing) super.log(message, ...rest);
  }
}

export interface WarningsRow {
  pattern: PatternName;
  processes: number;
  keys: number;
  rate: number;
  duration_ms: number;
  fail_rate: number;
  reqs: number;
  loads: number;
  loader_errors: number;
  /** Calls that rejected with a loader error. */
  caller_errors: number;
  early_recomputes: number;
  /** Loader errors that reached no caller: failed early recomputations (background). */
  failed_early: number;
  /** "early recomputation ... failed" lines the library logged, and its other warnings. */
  warning_lines: number;
  other_warnings: number;
  /** At most 1 line per 10 s per process. */
  allowed_lines: number;
  sample: string | null;
}

export const WARNINGS_COLUMNS: Column<WarningsRow>[] = [
  { header: 'pattern', value: (r) => r.pattern },
  { header: 'procs', value: (r) => r.processes },
  { header: 'reqs', value: (r) => r.reqs },
  { header: 'loads', value: (r) => r.loads },
  { header: 'loader_errors', value: (r) => r.loader_errors },
  { header: 'caller_errors', value: (r) => r.caller_errors },
  { header: 'early_recomputes', value: (r) => r.early_recomputes },
  { header: 'failed_early', value: (r) => r.failed_early },
  { header: 'early_warning_lines', value: (r) => r.warning_lines },
  { header: 'other_warnings', value: (r) => r.other_warnings },
  { header: 'allowed_lines', value: (r) => r.allowed_lines },
];

export async function warnings(ctx: ScenarioContext): Promise<WarningsRow[]> {
  const o = ctx.opts;
  ctx.log(
    `\n## warnings: loader failing ${(o.warnFailRate * 100).toFixed(0)} % of the time, Poisson ${o.warnRate} req/s over ${o.warnKeys} keys (uniform), ` +
      `TTL ${o.warnTtlMs} ms, backend ${o.backendMs} ms, beta ${o.beta}, ${o.warnDurationMs} ms per pattern, one fresh app (1 process) each; ` +
      `the library's Nest logger lines captured`,
  );
  const rows: WarningsRow[] = [];
  const capture = new CaptureLogger();
  try {
    for (const pattern of o.warnPatterns) {
      const app = await BenchApp.create(
        ctx.config(o.warnTtlMs, { failRate: o.warnFailRate }),
        capture,
      );
      const from = capture.lines.length;
      const f0 = app.backend.failures;
      let res: LoadResult;
      try {
        res = await runLoad(app, {
          pattern,
          keyPrefix: `warn:${pattern}:`,
          keys: o.warnKeys,
          zipf: 0,
          mode: 'poisson',
          rate: o.warnRate,
          durationMs: o.warnDurationMs,
        });
        await sleep(o.backendMs + 100); // recomputations started at the end finish and log
      } finally {
        await app.close();
      }
      const failures = app.backend.failures - f0;
      const seen = new Set(res.errorIdsSeen);
      let unseen = 0;
      for (let id = f0 + 1; id <= f0 + failures; id++) if (!seen.has(id)) unseen++;
      const lines = capture.lines.slice(from).filter((l) => l.level === 'warn');
      const early = lines.filter((l) => /early recomputation/.test(l.message));
      rows.push({
        pattern,
        processes: 1,
        keys: o.warnKeys,
        rate: o.warnRate,
        duration_ms: o.warnDurationMs,
        fail_rate: o.warnFailRate,
        reqs: res.reqs,
        loads: res.counters.loads,
        loader_errors: failures,
        caller_errors: res.callerErrors,
        early_recomputes: res.counters.earlyRecomputes,
        failed_early: unseen,
        warning_lines: early.length,
        other_warnings: lines.length - early.length,
        allowed_lines: Math.max(1, Math.ceil(o.warnDurationMs / 10_000)),
        sample: early[0]?.message ?? null,
      });
    }
  } finally {
    capture.capturing = false;
    // Later apps of this process log to the console again, errors and warnings only.
    Logger.overrideLogger(new ConsoleLogger({ logLevels: ['error', 'warn'] }));
  }
  ctx.log(renderTable(WARNINGS_COLUMNS, rows));
  for (const r of rows) if (r.sample) ctx.log(`${r.pattern}: first line: ${r.sample}`);
  logTargets(ctx, warningsTargets(rows));
  return rows;
}

export function warningsTargets(rows: WarningsRow[]): Target[] {
  const sf = rows.find((r) => r.pattern === 'singleflight');
  return rows
    .filter((r) => r.pattern !== 'singleflight')
    .map((r) => ({
      id: 'warnings',
      text: `${r.pattern}: <= 1 "early recomputation failed" line per 10 s per process`,
      met: r.warning_lines <= r.allowed_lines * r.processes,
      measured:
        `${r.warning_lines} line(s) in ${r.duration_ms} ms for ${r.failed_early} failed early recomputation(s)` +
        (sf ? ` (singleflight: ${sf.warning_lines})` : ''),
    }));
}
