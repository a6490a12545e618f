/*
 * Smoke run of `npm run bench:ticks` (the benchmark is not part of `npm test`, this small run of
 * it is): a 3,000-message drain and 1 s at 2,000 msgs/s, with the rows the targets need, on the
 * benchmark's own throwaway redis-server. Asserts only structural facts that hold on a slow, busy
 * machine: every message handled exactly once and acknowledged, the tables and the targets there.
 */
import { renderTable } from '../../shared/table';
import { runTicksBench, TicksReport } from '../main';
import { parseOptions } from '../../shared/args';
import { SPEC } from '../options';
import { columns } from '../rows';

describe('bench:ticks smoke run', () => {
  const options = parseOptions(SPEC, [
    ...['--modes', 'drain,fixed', '--rate', '2000', '--duration', '1'],
    ...['--messages', '3000', '--warmup', '0.25'],
  ]);
  let report: TicksReport;
  const lines: string[] = [];

  beforeAll(async () => {
    report = await runTicksBench(
      options,
      (line) => lines.push(line),
      () => undefined,
    );
  }, 180_000);

  it('prints the machine, the versions and the measured commit', () => {
    const out = lines.join('\n');
    expect(out).toMatch(/node v\d+/);
    expect(out).toMatch(/redis \d+\.\d+/);
    expect(out).toContain('@nestjs/microservices');
    expect(out).toContain('ioredis');
    expect(out).toMatch(/cpus \d+ x /);
    expect(out).toContain('libs/stream-batch-ack) at ');
  });

  it('runs the default rows of each mode, each message handled once and acked', () => {
    const got = report.rows.map((r) => `${r.mode}/${r.variant}`);
    expect(got).toEqual([
      'drain/batch',
      'drain/batch-idem-redis',
      'drain/batch-handler',
      'drain/idem-memory',
      'drain/idem-redis',
      'drain/raw',
      'fixed/batch-handler',
      'fixed/idem-redis',
      'fixed/raw',
    ]);
    for (const r of report.rows) {
      const row = `${r.mode}/${r.variant}`;
      const check = [r.missing, r.duplicates, r.pendingAfter, r.failedOrSkipped, r.complete];
      expect({ row, check }).toEqual({ row, check: [0, 0, 0, 0, true] });
      expect(r.msgsPerSec).toBeGreaterThan(0);
      expect(Number.isFinite(r.p99)).toBe(true);
      expect(r.cpuMsPer100k).toBeGreaterThan(0);
      expect(r.xackPer1000).toBeGreaterThan(0);
    }
  });

  it('relates the rows: % of raw and Redis CPU on drain rows, CPU vs plain on idempotency rows', () => {
    for (const r of report.rows.filter((x) => x.mode === 'drain')) {
      expect(r.ofRaw).toBeGreaterThan(0);
      expect(r.redisCpuUsPerMsg).toBeGreaterThan(0);
      expect(r.redisCpuVsRaw).toBeGreaterThan(0);
    }
    for (const r of report.rows.filter((x) => x.mode !== 'drain'))
      expect(r.redisCpuUsPerMsg).toBeUndefined();
    for (const r of report.rows.filter((x) => x.variant.includes('idem-')))
      expect(r.cpuVsPlain).toBeGreaterThan(0);
    // Default key: one GET before each handled batch, one script call after it.
    for (const r of report.rows.filter((x) => x.variant.endsWith('idem-redis'))) {
      expect(r.commands.get ?? 0).toBeGreaterThanOrEqual(1);
      expect((r.commands.evalsha ?? 0) + (r.commands.eval ?? 0)).toBeGreaterThanOrEqual(1);
    }
    const table = renderTable(columns(options), report.rows);
    expect(table).toContain('% of raw');
    expect(table).toContain('CPU vs plain');
    expect(table).toContain('CPU ms/100k');
    expect(table).toContain('Redis CPU s/1M');
  });

  it('prints the targets table with a verdict for each target', () => {
    expect(report.targets).toHaveLength(10);
    for (const t of report.targets) expect([true, false]).toContain(t.met);
    const out = lines.join('\n');
    expect(out).toContain('## targets');
    expect(out).toContain('raw loop, same runs');
  });
});
