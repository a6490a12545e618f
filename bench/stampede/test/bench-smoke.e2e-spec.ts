/*
 * Smoke run of `npm run bench:stampede` (issue 3: the benchmark is not part of `npm test`, this
 * small run of it is). One measured round at concurrency 10, two forked instances, short steady
 * and snowstorm runs; asserts only structural facts that hold on a slow, busy machine.
 */
import { Redis } from 'ioredis';
import { renderTable } from '../../shared/table';
import { BenchReport, CLIFF_COLUMNS, runStampedeBench } from '../stampede-bench';

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
