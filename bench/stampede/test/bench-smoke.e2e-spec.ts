/*
 * Smoke run of `npm run bench:stampede` (the benchmark is not part of `npm test`, this
 * small run of it is). One measured round at concurrency 10, two forked instances, short steady
 * and snowstorm runs; then the resilience and the tiers scenarios with tiny parameters (each on
 * its own throwaway redis-server, as in the real run). Asserts only structural facts that hold on
 * a slow, busy machine, never performance.
 */
import { Redis } from 'ioredis';
import { renderTable } from '../../shared/table';
import { CpuBurn } from '../cpu-burn';
import { parseArgs } from '../main';
import { CLIFF_COLUMNS } from '../cliff';
import { idealLoadsPerRequest } from '../l1-hotset';
import { parseVariant, scenariosOf } from '../options';
import { BenchReport, runStampedeBench } from '../stampede-bench';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = 1;
const PATTERNS = [
  'naive',
  'singleflight',
  'xfetch',
  'distlock-poll',
  'distlock',
  'two-tier',
] as const;

describe('bench:stampede smoke run', () => {
  let report: BenchReport;
  const lines: string[] = [];

  beforeAll(async () => {
    report = await runStampedeBench(
      {
        redisUrl: REDIS_URL,
        scenario: 'all',
        concurrency: [10],
        rounds: ROUNDS,
        warmup: 1,
        multiInstances: 2,
        multiConcurrency: [10],
        rate: 200,
        durationMs: 300,
        steadyTtlMs: 200,
        snowKeys: 20,
        snowRate: 200,
        snowDurationMs: 300,
        snowTtlMs: 200,
      },
      (line) => lines.push(line),
    );
  }, 60_000);

  it('prints the versions and the tables', () => {
    const out = lines.join('\n');
    expect(out).toMatch(/node v\d+/);
    expect(out).toMatch(/redis \d+\.\d+/);
    expect(out).toContain('@nestjs/core');
    expect(out).toContain('ioredis');
    expect(out).toMatch(/cpus \d+ x /);
    expect(out).toContain('## cliff');
    expect(out).toContain('## steady');
    expect(out).toContain('## snowstorm');
    expect(renderTable(CLIFF_COLUMNS, report.cliff)).toContain('lock_contention_ms');
  });

  it('produces a cliff row for every pattern on 1 and on 2 instances', () => {
    for (const k of [1, 2]) {
      const rows = report.cliff.filter((r) => r.instances === k);
      expect(rows.map((r) => r.pattern).sort()).toEqual([...PATTERNS].sort());
      for (const r of rows) {
        expect(r.reqs).toBe(10 * ROUNDS);
        expect(r.store_errors).toBe(0);
        expect(Number.isFinite(r.p99)).toBe(true);
        expect(r.p99).toBeGreaterThanOrEqual(90); // every round waits for the 100 ms backend
      }
    }
  });

  it('lets one loader call per round through every protected pattern on one instance', () => {
    const db = (p: string) =>
      report.cliff.find((r) => r.instances === 1 && r.pattern === p)!.db_calls;
    for (const p of ['singleflight', 'xfetch', 'distlock-poll', 'distlock', 'two-tier'])
      expect(db(p)).toBe(ROUNDS);
    expect(db('naive')).toBeGreaterThanOrEqual(ROUNDS);
  });

  it('holds distlock and two-tier to one loader call per round across 2 processes', () => {
    const db = (p: string) =>
      report.cliff.find((r) => r.instances === 2 && r.pattern === p)!.db_calls;
    expect(db('distlock')).toBe(ROUNDS);
    expect(db('two-tier')).toBe(ROUNDS);
    expect(db('distlock-poll')).toBe(ROUNDS);
    expect(db('singleflight')).toBeGreaterThanOrEqual(ROUNDS);
    expect(db('singleflight')).toBeLessThanOrEqual(2 * ROUNDS);
    expect(db('naive')).toBeGreaterThanOrEqual(ROUNDS);
  });

  it('measures steady traffic and the snowstorm', () => {
    expect(report.steady.map((r) => r.pattern)).toEqual([
      'singleflight',
      'xfetch',
      'xfetch-uncoalesced',
    ]);
    for (const r of report.steady) {
      expect(r.reqs).toBeGreaterThan(0);
      expect(r.db_calls).toBeGreaterThanOrEqual(0);
      expect(r.blocking_misses).toBeLessThanOrEqual(r.reqs);
    }
    expect(report.snowstorm).toHaveLength(2);
    for (const r of report.snowstorm) expect(r.max_window_calls).toBeGreaterThanOrEqual(0);
    expect(report.targets.length).toBeGreaterThan(0);
  });

  it('deletes every key it wrote', async () => {
    const redis = new Redis(REDIS_URL);
    try {
      const left: string[] = [];
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${report.prefix}*`, 'COUNT', 1000);
        left.push(...keys);
        cursor = next;
      } while (cursor !== '0');
      expect(left).toEqual([]);
    } finally {
      await redis.quit();
    }
  });
});

describe('bench:stampede smoke run of the resilience scenarios', () => {
  let report: BenchReport;
  const lines: string[] = [];

  beforeAll(async () => {
    report = await runStampedeBench(
      {
        redisUrl: REDIS_URL,
        scenario: 'resilience',
        backendMs: 20,
        operationTimeoutMs: 100,
        cooldownMs: 200,
        latePatterns: ['singleflight', 'two-tier-xfetch'],
        latePauseMs: 300,
        stallPatterns: ['singleflight', 'two-tier'],
        stallRate: 200,
        stallKeys: 10,
        stallTtlMs: 300,
        stallDurationMs: 900,
        stallWarmupMs: 100,
        stallPauseMs: 300,
        hotsetPatterns: ['singleflight', 'two-tier'],
        hotsetKeys: 200,
        hotsetRate: 300,
        hotsetTtlMs: 300,
        hotsetBackendMs: 5,
        hotsetDurationMs: 400,
        hotsetWarmupMs: 100,
        hotsetProbeKeys: 20,
        hotsetHotKeys: 10,
        fanoutPatterns: ['singleflight', 'two-tier'],
        fanoutInstances: 2,
        fanoutKeys: 50,
        fanoutRate: 200,
        fanoutTtlMs: 300,
        fanoutBackendMs: 20,
        fanoutDurationMs: 400,
        fanoutWarmupMs: 100,
        warnPatterns: ['singleflight', 'xfetch'],
        warnKeys: 10,
        warnRate: 200,
        warnTtlMs: 300,
        warnFailRate: 0.3,
        warnDurationMs: 500,
      },
      (line) => lines.push(line),
    );
  }, 90_000);

  it('prints a table per scenario, each with singleflight beside the library patterns', () => {
    const out = lines.join('\n');
    for (const title of ['## late-lock', '## stall', '## hotset', '## fanout', '## warnings'])
      expect(out).toContain(title);
    expect(out).toMatch(/private redis-server \d+\.\d+/);
    expect(out).toContain('lock_left');
    expect(out).toContain('loads/s_during');
    expect(out).toContain('cmds/load');
    expect(out).toContain('notifications_received');
    expect(out).toContain('early_warning_lines');
    expect(out).toMatch(/^command\s+singleflight\s+two-tier$/m); // commandstats breakdown
    for (const section of [
      report.lateLock,
      report.stall,
      report.hotset,
      report.fanout,
      report.warnings,
    ])
      expect(section.map((r) => r.pattern)).toContain('singleflight');
  });

  it('late-lock: a row per pattern, and the try-lock row of the XFetch + lock pattern', () => {
    expect(report.lateLock.map((r) => `${r.pattern}/${r.path}`)).toEqual([
      'singleflight/no lock',
      'two-tier-xfetch/read-or-lock',
      'two-tier-xfetch/try-lock',
    ]);
    for (const r of report.lateLock) {
      expect(Number.isFinite(r.call1_ms)).toBe(true);
      expect(Number.isFinite(r.call2_ms)).toBe(true);
      expect([0, 1]).toContain(r.lock_left);
    }
  });

  it('stall: backend calls per second around the pause and latencies of the paused requests', () => {
    expect(report.stall.map((r) => r.pattern)).toEqual(['singleflight', 'two-tier']);
    for (const r of report.stall) {
      expect(r.mode).toBe('ALL');
      expect(r.reqs).toBeGreaterThan(0);
      expect(r.loads_per_s_before).toBeGreaterThanOrEqual(0);
      expect(r.during_reqs).toBeLessThanOrEqual(r.reqs);
    }
  });

  it('hotset: commands per request, per load, per hit, and the breakdown by command', () => {
    expect(report.hotset.map((r) => r.pattern)).toEqual(['singleflight', 'two-tier']);
    for (const r of report.hotset) {
      expect(r.reqs).toBeGreaterThan(0);
      expect(r.cmds).toBeGreaterThan(0);
      expect(r.commands.get).toBeGreaterThan(0);
      expect(r.commands.set).toBeGreaterThan(0);
      expect(Number.isFinite(r.cmds_per_req)).toBe(true);
      expect(r.cmds_per_hit).toBeGreaterThan(0);
      expect(r.cmds_per_cold_load).toBeGreaterThan(0);
    }
  });

  it('fanout: a row per instance and one for the cluster', () => {
    for (const pattern of ['singleflight', 'two-tier']) {
      const rows = report.fanout.filter((r) => r.pattern === pattern);
      expect(rows.map((r) => r.instance)).toEqual(['1', '2', 'all']);
      const all = rows[2];
      expect(all.reqs).toBe(rows[0].reqs + rows[1].reqs);
      expect(all.loads).toBe(rows[0].loads + rows[1].loads);
      for (const r of rows)
        expect(r.notifications === null || typeof r.notifications === 'number').toBe(true);
    }
  });

  it('warnings: counts failed loads and the library warning lines', () => {
    expect(report.warnings.map((r) => r.pattern)).toEqual(['singleflight', 'xfetch']);
    for (const r of report.warnings) {
      expect(r.reqs).toBeGreaterThan(0);
      expect(r.loader_errors).toBeLessThanOrEqual(r.loads);
      expect(r.failed_early).toBeLessThanOrEqual(r.loader_errors);
      expect(r.allowed_lines).toBe(1);
    }
    expect(report.warnings[0].warning_lines).toBe(0); // singleflight never recomputes early
  });

  it('checks a target for every resilience scenario', () => {
    const ids = new Set(report.targets.map((t) => t.id));
    for (const id of ['late-lock', 'stall', 'hotset', 'fanout', 'warnings'])
      expect(ids).toContain(id);
    expect(lines.join('\n')).toMatch(/^(MET|NOT MET|N\/A) +\[stall\]/m);
  });
});

describe('bench:stampede smoke run of the tiers scenarios', () => {
  let report: BenchReport;
  const lines: string[] = [];

  beforeAll(async () => {
    report = await runStampedeBench(
      {
        redisUrl: REDIS_URL,
        scenario: 'tiers',
        backendMs: 20,
        operationTimeoutMs: 100,
        cooldownMs: 200,
        l1HotsetVariants: ['two-tier-xfetch', 'two-tier-xfetch+l1', 'bento-like'],
        l1HotsetInstances: 2,
        l1HotsetKeys: 200,
        l1HotsetRate: 300,
        l1HotsetTtlMs: 300,
        l1HotsetBackendMs: 5,
        l1HotsetDurationMs: 400,
        l1HotsetWarmupMs: 100,
        l1HotsetProbeKeys: 20,
        l1HotsetHotKeys: 10,
        graceKeys: 10,
        graceRate: 200,
        graceTtlMs: 200,
        graceDurationMs: 500,
        graceFailRate: 0.3,
        graceMs: 5000,
        graceBackoffMs: 100,
        l1StallKeys: 10,
        l1StallRate: 200,
        l1StallTtlMs: 5000,
        l1StallDurationMs: 900,
        l1StallPauseMs: 300,
      },
      (line) => lines.push(line),
    );
  }, 90_000);

  it('prints a table per scenario, the variant without L1 beside the one with it', () => {
    const out = lines.join('\n');
    for (const title of ['## l1-hotset', '## grace-failing', '## l1-stall'])
      expect(out).toContain(title);
    expect(out).toMatch(/private redis-server \d+\.\d+/);
    for (const header of ['cmds/req', 'floor_cmds/req', 'hit_p99_ms', 'l1_hits%', 'errors/failure'])
      expect(out).toContain(header);
    expect(out).toContain('excess_loads');
    expect(out).toMatch(/^command\s+two-tier-xfetch\s+two-tier-xfetch\+l1\s+bento-like$/m);
  });

  it('l1-hotset: commands per request, its floor, loads per key per TTL, hits measured in the caller', () => {
    expect(report.l1Hotset.map((r) => r.variant)).toEqual([
      'two-tier-xfetch',
      'two-tier-xfetch+l1',
      'bento-like',
    ]);
    for (const r of report.l1Hotset) {
      expect(r.instances).toBe(2);
      expect(r.reqs).toBeGreaterThan(0);
      expect(Number.isFinite(r.cmds_per_req)).toBe(true);
      expect(r.cmds_per_load).toBeGreaterThan(0);
      expect(r.floor_cmds_per_req).toBeCloseTo(r.loads_per_req * r.cmds_per_load, 9);
      expect(r.hits + r.ran_load + r.waited_lock + r.joined_load).toBeLessThanOrEqual(r.reqs);
      expect(r.store_hits).toBeLessThanOrEqual(r.hits);
    }
    const [plain, withL1] = report.l1Hotset;
    expect(plain.l1_hit_share).toBe(0); // no L1 in those instances
    expect(withL1.l1_hit_share).toBeGreaterThan(0); // l1: true reached the forked instances
  });

  it('grace-failing: injected failures and the errors callers saw, with and without grace', () => {
    expect(report.graceFailing.map((r) => [r.pattern, r.grace_ms])).toEqual([
      ['two-tier', 0],
      ['two-tier-grace', 5000],
    ]);
    for (const r of report.graceFailing) {
      expect(r.reqs).toBeGreaterThan(0);
      expect(r.failures).toBeLessThanOrEqual(r.loads);
      expect(r.caller_errors).toBeLessThanOrEqual(r.reqs);
    }
    expect(report.graceFailing[0].stale_serves).toBe(0); // no grace, nothing stale
  });

  it('l1-stall: backend calls and latency during the pause, with and without L1', () => {
    expect(report.l1Stall.map((r) => r.variant)).toEqual(['two-tier-xfetch', 'two-tier-xfetch+l1']);
    for (const r of report.l1Stall) {
      expect(r.reqs).toBeGreaterThan(0);
      expect(r.during_reqs).toBeLessThanOrEqual(r.reqs);
      expect(r.excess_loads).toBeLessThanOrEqual(r.loads_during);
    }
    expect(report.l1Stall[0].l1_hits).toBe(0);
    expect(report.l1Stall[1].l1_hits).toBeGreaterThan(0);
  });

  it('checks a target for every tiers scenario', () => {
    const ids = new Set(report.targets.map((t) => t.id));
    for (const id of ['l1-hotset', 'grace-failing', 'l1-stall']) expect(ids).toContain(id);
  });
});

describe('bench:stampede smoke run of the otel scenario', () => {
  let report: BenchReport;
  const lines: string[] = [];

  beforeAll(async () => {
    report = await runStampedeBench(
      {
        redisUrl: REDIS_URL,
        scenario: 'otel',
        otelVariants: ['api', 'sdk'],
        otelKeys: 50,
        otelConcurrency: 8,
        otelWarmupMs: 100,
        otelDurationMs: 200,
        otelSliceMs: 100,
        otelRounds: 1,
      },
      (line) => lines.push(line),
    );
  }, 90_000);

  it('measures each variant beside telemetry off, on both tiers, and checks the budgets', () => {
    expect(report.otel.map((r) => `${r.variant}/${r.tier}`)).toEqual([
      'api/store',
      'api/l1',
      'sdk/store',
      'sdk/l1',
    ]);
    for (const row of report.otel) {
      expect(row.off_per_s).toBeGreaterThan(0);
      expect(row.on_per_s).toBeGreaterThan(0);
    }
    expect(lines.join('\n')).toMatch(/stampede_\* lines/);
    expect(report.targets.map((t) => t.id)).toEqual([
      'otel-api-store',
      'otel-api-l1',
      'otel-sdk-store',
      'otel-sdk-l1',
    ]);
  });
});

describe('bench:stampede options', () => {
  it('takes --otel variants and tiers (and --otel alone means the otel scenario)', () => {
    expect(parseArgs(['--otel', 'none,api,sdk-metrics']).options).toMatchObject({
      scenario: 'otel',
      otelVariants: ['none', 'api', 'sdk-metrics'],
    });
    expect(parseArgs(['--otel-tiers', 'l1']).options).toMatchObject({ otelTiers: ['l1'] });
  });

  it('expands scenario groups and lists', () => {
    expect(scenariosOf('all')).toEqual(['cliff', 'steady', 'snowstorm']);
    expect(scenariosOf('resilience')).toEqual([
      'late-lock',
      'stall',
      'hotset',
      'fanout',
      'warnings',
    ]);
    expect(scenariosOf('warnings,steady')).toEqual(['steady', 'warnings']);
    expect(scenariosOf('tiers')).toEqual(['l1-hotset', 'grace-failing', 'l1-stall']);
  });

  it('takes the tiers variants: a pattern, or pattern+l1 for a library pattern', () => {
    expect(parseArgs(['--l1-stall-variants', 'two-tier,two-tier+l1']).options).toMatchObject({
      l1StallVariants: ['two-tier', 'two-tier+l1'],
    });
    expect(parseVariant('two-tier-xfetch+l1')).toEqual({
      name: 'two-tier-xfetch+l1',
      pattern: 'two-tier-xfetch',
      l1: true,
    });
    expect(() => parseVariant('bento-like+l1')).toThrow(/bench-local/);
    expect(() => parseVariant('nope')).toThrow(/unknown pattern/);
  });

  it('computes the loads per request of one load per key per TTL', () => {
    expect(idealLoadsPerRequest(1, 0, 100, 1000)).toBeCloseTo(1 / 101, 9); // 100 per TTL, 1 load
    expect(idealLoadsPerRequest(10_000, 1, 5000, 2000)).toBeCloseTo(0.243, 2);
  });

  it('takes --cpu-burn with or without a count', () => {
    expect(parseArgs(['--cpu-burn']).options.cpuBurn).toBe(1);
    expect(parseArgs(['--cpu-burn', '3', '--scenario', 'steady']).options).toMatchObject({
      cpuBurn: 3,
      scenario: 'steady',
    });
    expect(parseArgs(['--cpu-burn=2']).options.cpuBurn).toBe(2);
    expect(parseArgs(['--cpu-burn', '--scenario', 'steady']).options).toMatchObject({
      cpuBurn: 1,
      scenario: 'steady',
    });
  });

  it('starts busy-loop processes and kills them', async () => {
    const burn = CpuBurn.start(1);
    const [pid] = burn.pids;
    expect(pid).toBeGreaterThan(0);
    expect(() => process.kill(pid, 0)).not.toThrow();
    await burn.stop();
    expect(() => process.kill(pid, 0)).toThrow();
  });
});
