/*
 * The fanout (several instances sharing keys) and warnings (a failing loader) scenarios of
 * bench:stampede; fanout runs on a private redis-server.
 */
import { ConsoleLogger, Logger, LoggerService, LogLevel } from '@nestjs/common';
import { columns } from '../shared/columns';
import type { Target } from '../shared/targets';
import { BenchApp } from './bench-app';
import { LOCK_PATTERNS, PatternName, sumCounters } from './patterns';
import { eachOf, q, round2, runScenario, ScenarioContext, sleep } from './scenario';
import { withInstances } from './instances';
import { LoadResult, runLoad, warmAndMeasure, poissonJob } from './load';
import { group } from './options';

// --- fanout -------------------------------------------------------------------------------

/** One instance's row (1..K), or the cluster's ('all', with the server's PUBLISH commands). */
function fanoutRow(pattern: PatternName, instance: string, list: LoadResult[], publishes?: number) {
  const c = sumCounters(list.map((r) => r.counters));
  const notes = list.map((r) => r.notifications);
  const latencies = list.flatMap((r) => r.latencies ?? []);
  return {
    pattern,
    instance,
    reqs: list.reduce((a, r) => a + r.reqs, 0),
    loads: c.loads,
    lock_waits: c.lockWaits,
    lock_wait_ms: round2(c.lockWaitMs),
    /** Fill notifications the stores received (null: the library has no counter). */
    notifications: notes.some((n) => n === null)
      ? null
      : notes.reduce<number>((a, n) => a + (n ?? 0), 0),
    /** 'all' only: PUBLISH commands on the server (fills and releases that notified). */
    publishes: publishes ?? null,
    p99: q(latencies, 0.99),
  };
}
export type FanoutRow = ReturnType<typeof fanoutRow>;

export const FANOUT_COLUMNS = columns<FanoutRow>(
  'pattern, instance, reqs, loads(fills)=loads, lock_waits, lock_wait_ms:1, ' +
    'notifications_received, notif/lock_wait, publishes, p99_ms=p99:2',
  {
    notifications_received: (r) => r.notifications ?? 'n/a',
    'notif/lock_wait': ({ notifications: n, lock_waits: w }) =>
      n === null ? 'n/a' : w > 0 ? (n / w).toFixed(2) : n === 0 ? '0' : 'inf',
  },
);

export function fanout(ctx: ScenarioContext) {
  const o = ctx.opts;
  const g = group(o, 'fanout');
  const k = Math.max(2, o.fanoutInstances);
  return runScenario(ctx, {
    privateRedis: true,
    title: (redis) =>
      `fanout: ${redis.describe()}; ${k} forked instances, ${o.fanoutKeys} keys, Zipf s=${o.fanoutZipf}, Poisson ${o.fanoutRate} req/s in all ` +
      `(${Math.round(o.fanoutRate / k)} per instance), TTL ${o.fanoutTtlMs} ms, backend ${o.fanoutBackendMs} ms, ${o.fanoutDurationMs} ms measured after ` +
      `${o.fanoutWarmupMs} ms of warm-up; notifications = the store's notificationsReceived`,
    rows: (redis) => {
      const cfg = ctx.config(o.fanoutTtlMs, { backendMs: o.fanoutBackendMs }, redis);
      return withInstances(cfg, k, async (instances) => {
        const perPattern = await eachOf(o.fanoutPatterns, async (p) => {
          const job = poissonJob(p, `fan:${p}:`, g.keys, g.rate / k, g.warmupMs, g.zipf);
          const measured = { perRequest: true };
          const run = await warmAndMeasure(instances, redis, job, g.durationMs, measured);
          return [
            ...run.results.map((r, i) => fanoutRow(p, String(i + 1), [r])),
            fanoutRow(p, 'all', run.results, run.commands.publish ?? 0),
          ];
        });
        return perPattern.flat();
      });
    },
    columns: FANOUT_COLUMNS,
    targets: fanoutTargets,
  });
}

function fanoutTargets(rows: FanoutRow[]): Target[] {
  return [...new Set(rows.map((r) => r.pattern))]
    .filter((pattern) => LOCK_PATTERNS.includes(pattern))
    .map((pattern) => {
      const per = rows.filter((r) => r.pattern === pattern && r.instance !== 'all');
      const all = rows.find((r) => r.pattern === pattern && r.instance === 'all')!;
      const text = `${pattern}: fill notifications received per instance <= its own lockWaits (+5% +5), not the cluster's fills`;
      const cluster = `cluster fills ${all.loads}, publishes ${all.publishes}`;
      const na = per.some((r) => r.notifications === null);
      return {
        id: 'fanout',
        text,
        met: na ? null : per.every((r) => r.notifications! <= r.lock_waits * 1.05 + 5),
        measured: na
          ? `n/a (this library has no RedisStore.notificationsReceived); ${cluster}`
          : `${per.map((r) => `#${r.instance} ${r.notifications} vs ${r.lock_waits}`).join(', ')}; ${cluster}`,
      };
    });
}

// --- warnings -----------------------------------------------------------------------------

/** Nest logger of the warnings scenario: keeps the library's warnings and errors. */
class CaptureLogger implements LoggerService {
  readonly lines: { level: LogLevel; message: string }[] = [];
  log(): void {}
  warn(message: unknown): void {
    this.lines.push({ level: 'warn', message: String(message) });
  }
  error(message: unknown): void {
    this.lines.push({ level: 'error', message: String(message) });
  }
}

export type WarningsRow = Awaited<ReturnType<typeof warningsRow>>;

export const WARNINGS_COLUMNS = columns<WarningsRow>(
  'pattern, procs=processes, reqs, loads, loader_errors, caller_errors, early_recomputes, ' +
    'failed_early, early_warning_lines=warning_lines, other_warnings, allowed_lines',
);

async function warningsRow(ctx: ScenarioContext, capture: CaptureLogger, pattern: PatternName) {
  const o = ctx.opts;
  const g = group(o, 'warn');
  const cfg = ctx.config(g.ttlMs, { failRate: g.failRate });
  const { res, from, f0, failures } = await BenchApp.with(
    cfg,
    async (app) => {
      const from = capture.lines.length;
      const f0 = app.backend.failures;
      const job = poissonJob(pattern, `warn:${pattern}:`, g.keys, g.rate, g.durationMs);
      const res = await runLoad(app, job);
      await sleep(o.backendMs + 100); // recomputations started at the end finish and log
      return { res, from, f0, failures: app.backend.failures - f0 };
    },
    capture,
  );
  const seen = new Set(res.errorIdsSeen);
  let unseen = 0;
  for (let id = f0 + 1; id <= f0 + failures; id++) if (!seen.has(id)) unseen++;
  const lines = capture.lines.slice(from).filter((l) => l.level === 'warn');
  const early = lines.filter((l) => /early recomputation/.test(l.message));
  return {
    pattern,
    processes: 1,
    keys: o.warnKeys,
    rate: o.warnRate,
    duration_ms: o.warnDurationMs,
    fail_rate: o.warnFailRate,
    reqs: res.reqs,
    loads: res.counters.loads,
    loader_errors: failures,
    /** Calls that rejected with a loader error. */
    caller_errors: res.callerErrors,
    early_recomputes: res.counters.earlyRecomputes,
    /** Loader errors that reached no caller: failed early recomputations (background). */
    failed_early: unseen,
    /** "early recomputation ... failed" lines the library logged, and its other warnings. */
    warning_lines: early.length,
    other_warnings: lines.length - early.length,
    /** At most 1 line per 10 s per process. */
    allowed_lines: Math.max(1, Math.ceil(o.warnDurationMs / 10_000)),
    sample: early[0]?.message ?? null,
  };
}

export function warnings(ctx: ScenarioContext) {
  const o = ctx.opts;
  return runScenario(ctx, {
    title: () =>
      `warnings: loader failing ${(o.warnFailRate * 100).toFixed(0)} % of the time, Poisson ${o.warnRate} req/s over ${o.warnKeys} keys (uniform), ` +
      `TTL ${o.warnTtlMs} ms, backend ${o.backendMs} ms, beta ${o.beta}, ${o.warnDurationMs} ms per pattern, one fresh app (1 process) each; ` +
      `the library's Nest logger lines captured`,
    rows: async () => {
      const capture = new CaptureLogger();
      try {
        return await eachOf(o.warnPatterns, (p) => warningsRow(ctx, capture, p));
      } finally {
        // Later apps of this process log to the console again, errors and warnings only.
        Logger.overrideLogger(new ConsoleLogger({ logLevels: ['error', 'warn'] }));
      }
    },
    columns: WARNINGS_COLUMNS,
    after: (rows) =>
      rows.flatMap((r) => (r.sample ? [`${r.pattern}: first line: ${r.sample}`] : [])),
    targets: warningsTargets,
  });
}

function warningsTargets(rows: WarningsRow[]): Target[] {
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
