/*
 * npm run bench:ticks -- [options]   (--help lists them; bench/ticks/options.ts)
 *
 * Producer and consumer of a Redis Streams consumer group as forked processes on a real Redis,
 * per mode and consumer variant; then the targets. --demo runs the demo-ticks app instead
 * (bench/demo-ticks), --rebalance ordered partitions while consumers move (rebalance.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { EnvInfo } from '../shared/env-info';
import { formatProfileSummary, summarizeProfile } from '../shared/cpu-profile';
import { SHARED_CPU_PCT, waitForQuiet } from '../shared/other-cpu';
import { renderTable } from '../shared/table';
import { renderTargets, Target } from '../shared/targets';
import { openRun } from './open-run';
import { parseTicksArgs, TicksBenchOptions, variantsOf } from './options';
import { Mode, OTEL_MODES, OtelMode, VARIANTS } from './protocol';
import * as R from './rows';
import { runOne } from './run-one';
import { evaluateTargets, sharedMachine } from './targets';

export interface TicksReport {
  env: EnvInfo;
  /** The commit of libs/stream-batch-ack that was measured. */
  revision: string;
  rows: R.Row[];
  medians: R.Row[];
  targets: Target[];
}

export async function runTicksBench(
  o: TicksBenchOptions,
  out: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
  progress: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Promise<TicksReport> {
  const packages = ['@nestjs/core', '@nestjs/microservices', 'ioredis', 'rxjs'];
  const run = await openRun(o['redis-url'], packages, { protocol: 2 });
  const { redis, redisUrl, env } = run;
  const rows: R.Row[] = [];
  const modes = o.modes as Mode[];
  try {
    out('bench:ticks: Redis Streams consumer group, producer and consumer in forked processes');
    out(run.envText);
    const revision = run.revision(['libs/stream-batch-ack']);
    out(`@nest-redis-resilience/stream-batch-ack (libs/stream-batch-ack) at ${revision}`);
    out(
      run.own
        ? `Redis: a throwaway redis-server started for this run (${redisUrl}); commandstats count this benchmark only`
        : `Redis: ${redisUrl} (given with --redis-url); commandstats are server-wide, other clients count too`,
    );
    const warmup = Math.round(o.rate * o.warmup);
    out(
      `fixed: ${o.rate} msgs/s for ${o.duration} s; drain: a backlog of ${warmup} + ${o.messages} messages written first, then consumed; max: ${o.messages} messages written as fast as possible while consumed (pipelines of ${o.pipeline} XADDs, 4 in flight); repeat ${o.repeat}`,
    );
    out(`rows: ${modes.map((m) => `${m}: ${variantsOf(o, m).join(', ')}`).join('; ')}`);
    out(
      `warm-up: the first ${warmup} messages of every run (${o.warmup} s at ${o.rate}/s; in drain and max mode as fast as the rest) are handled and acked but not measured`,
    );
    if (o['cpu-prof']) {
      mkdirSync(resolve(o['cpu-prof']), { recursive: true });
      out(`CPU profiles of the consumers' measured windows: ${resolve(o['cpu-prof'])}`);
    }
    out('');
    for (let n = 1; n <= o.repeat; n++)
      for (const mode of modes) {
        const runRows: R.Row[] = [];
        for (const variant of variantsOf(o, mode))
          // The raw loops do not use the library: one row whatever --otel says.
          for (const otel of o.otel && !variant.startsWith('raw') ? o.otel : [undefined]) {
            await waitForQuiet(o.quiet, progress);
            progress(`  run ${n}: ${mode} / ${variant}${otel ? ` / otel ${otel}` : ''} ...`);
            runRows.push(await runOne(redis, redisUrl, o, mode, variant, n, otel as OtelMode));
          }
        R.relate(runRows);
        rows.push(...runRows);
      }
    const medians = R.medianRows(rows);
    const order = (r: R.Row) =>
      VARIANTS.indexOf(r.variant) * 10 + (r.otel ? OTEL_MODES.indexOf(r.otel) : 0);
    for (const mode of modes) {
      const of = (xs: R.Row[]) => xs.filter((r) => r.mode === mode);
      const byRun = (a: R.Row, b: R.Row) => Number(a.run) - Number(b.run) || order(a) - order(b);
      out(`## ${R.modeLabel(mode, o)}`);
      out(renderTable(R.columns(o), [...of(rows).sort(byRun), ...of(medians).sort(byRun)]));
      out('');
    }
    for (const line of R.LEGEND) out(line);
    const shared = rows.filter(sharedMachine);
    if (shared.length > 0)
      out(
        `WARNING: ${shared.length} of ${rows.length} rows shared the machine with other processes (others' CPU > ${SHARED_CPU_PCT} %; the targets leave their runs out when other runs are clean): ${shared
          .map((r) => `${r.mode}/${r.variant}/${r.run} ${r.otherCpuPct!.toFixed(0)} %`)
          .join(', ')}`,
      );
    out('');
    out("## Redis time of the consumers' commands (INFO commandstats usec), ms per 100k messages");
    out(renderTable(R.REDIS_COLUMNS, [...rows, ...medians]));
    if (o.otel) {
      out('');
      out(
        '## OpenTelemetry cost (--otel): each row against the same mode, consumer and run without the API',
      );
      out(renderTable(R.OTEL_COLUMNS, R.otelCostRows(rows, medians)));
      out(R.OTEL_LEGEND);
    }
    // The targets are about the transport as installed (the API, no SDK).
    const targets = evaluateTargets(
      rows.filter((r) => r.otel === undefined || r.otel === 'api'),
      o,
    );
    out('');
    out(`## targets${o.repeat > 1 ? ` (medians of ${o.repeat} runs)` : ''}`);
    out(
      renderTargets(targets, { measured: 'measured (library)', baseline: 'raw loop, same runs' }),
    );
    const profiled = rows.filter((r) => r.profile);
    if (profiled.length > 0) out('\n## CPU profiles of the measured windows (self time)');
    for (const r of profiled) out(`\n${formatProfileSummary(summarizeProfile(r.profile!, 15))}`);
    return { env, revision, rows, medians, targets };
  } finally {
    await run.close();
  }
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--rebalance'))
    return void (await (await import('./rebalance')).runRebalanceBench(argv));
  if (argv.includes('--demo')) return (await import('../demo-ticks/main')).main(argv);
  const o = parseTicksArgs(argv);
  const report = await runTicksBench(o);
  if (o.json) {
    writeFileSync(o.json, `${JSON.stringify({ options: o, ...report }, null, 2)}\n`);
    process.stdout.write(`\nraw numbers written to ${o.json}\n`);
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
