/*
 * What the demo-ticks benchmark measured, and its report: the summary, the timeline of each
 * second, and whether every tick was accounted for.
 */
import { EnvInfo, formatEnvInfo } from '../shared/env-info';
import { renderTable } from '../shared/table';
import type { DemoTicksBenchOptions } from './options';

export interface TimelineRow {
  second: number;
  publishedPerS: number;
  handledPerS: number;
  xackPerS: number;
  lag: number;
  pending: number;
  rssMb: number;
}

export interface DemoTicksBenchResult {
  env: EnvInfo;
  options: DemoTicksBenchOptions;
  targetRate: number;
  published: number;
  publishFailed: number;
  publishSeconds: number;
  handled: number;
  /** From the collector's start to the last tick handled. */
  consumerSeconds: number;
  drainedAfterMs: number | null;
  duplicatesSkipped: number;
  deadLettered: number;
  e2eP50Ms: number;
  e2eP99Ms: number;
  e2eP50SteadyMs: number | null;
  e2eP99SteadyMs: number | null;
  xackCalls: number;
  xackPerSecond: number;
  xackPerSecondMax: number;
  serverXackCalls: number;
  meanAckBatch: number;
  rssMaxMb: number;
  rssEndMb: number;
  volumePublished: number;
  volumeInCandles: Record<string, number>;
  tradesInCandles: Record<string, number>;
  timeline: TimelineRow[];
}

// ---------------------------------------------------------------- helpers

/** Latency in ms; the histogram's last finite bucket is 10 s, so beyond it only a bound is known. */
function ms(value: number): string {
  return value >= 10_000 ? '>= 10000' : value.toFixed(1);
}

export function formatReport(r: DemoTicksBenchResult): string {
  const exact =
    r.published === r.handled + r.deadLettered &&
    Object.values(r.tradesInCandles).every((n) => n === r.published) &&
    Object.values(r.volumeInCandles).every((v) => v === r.volumePublished);
  const yes = (ok: boolean) => (ok ? 'yes' : 'NO');
  const rows = [
    {
      what: 'ticks published (XADD ok) / failed',
      value: `${r.published.toLocaleString('en-US')} / ${r.publishFailed}`,
      target: `${((r.targetRate * r.options.durationMs) / 1000).toLocaleString('en-US')}`,
      met: yes(r.publishFailed === 0),
    },
    {
      what: 'publish rate (ticks/s)',
      value: (r.published / r.publishSeconds).toFixed(0),
      target: String(r.targetRate),
      met: yes(r.published / r.publishSeconds >= r.targetRate * 0.95),
    },
    {
      what: 'consume rate (ticks/s, to the last tick)',
      value: (r.handled / r.consumerSeconds).toFixed(0),
      target: String(r.targetRate),
      met: yes(r.handled / r.consumerSeconds >= r.targetRate * 0.95),
    },
    {
      what: 'caught up after the collector stopped',
      value:
        r.drainedAfterMs === null
          ? 'not within the drain timeout'
          : `${(r.drainedAfterMs / 1000).toFixed(1)} s`,
      target: '-',
      met: '-',
    },
    {
      what: 'ticks handled / duplicates skipped / dead-lettered',
      value: `${r.handled.toLocaleString('en-US')} / ${r.duplicatesSkipped} / ${r.deadLettered}`,
      target: '-',
      met: '-',
    },
    {
      what: 'trades in candles 1m / 5m / 30m',
      value: ['1m', '5m', '30m']
        .map((i) => r.tradesInCandles[i].toLocaleString('en-US'))
        .join(' / '),
      target: `= published`,
      met: yes(Object.values(r.tradesInCandles).every((n) => n === r.published)),
    },
    {
      what: 'volume in candles 1m / 5m / 30m',
      value: ['1m', '5m', '30m']
        .map((i) => r.volumeInCandles[i].toLocaleString('en-US'))
        .join(' / '),
      target: `= ${r.volumePublished.toLocaleString('en-US')} published`,
      met: yes(Object.values(r.volumeInCandles).every((v) => v === r.volumePublished)),
    },
    { what: 'no tick lost or double counted', value: yes(exact), target: 'yes', met: yes(exact) },
    {
      what: 'e2e latency p50 / p99, whole run (ms)',
      value: `${ms(r.e2eP50Ms)} / ${ms(r.e2eP99Ms)}`,
      target: '-',
      met: '-',
    },
    {
      what: 'e2e latency p50 / p99, 2nd half of publishing (ms)',
      value: r.e2eP50SteadyMs === null ? '-' : `${ms(r.e2eP50SteadyMs)} / ${ms(r.e2eP99SteadyMs!)}`,
      target: '-',
      met: '-',
    },
    {
      what: 'XACK calls per second (mean / max second)',
      value: `${r.xackPerSecond.toFixed(1)} / ${r.xackPerSecondMax.toFixed(0)}`,
      target: '<= 25',
      met: yes(r.xackPerSecondMax <= 25),
    },
    {
      what: 'XACK calls: consumer / whole Redis server',
      value: `${r.xackCalls} / ${r.serverXackCalls}`,
      target: '-',
      met: '-',
    },
    { what: 'ids per XACK (mean)', value: r.meanAckBatch.toFixed(0), target: '-', met: '-' },
    {
      what: 'consumer RSS (max / at the end, MB)',
      value: `${r.rssMaxMb.toFixed(0)} / ${r.rssEndMb.toFixed(0)}`,
      target: '< 256',
      met: yes(r.rssMaxMb < 256),
    },
  ];
  const summary = renderTable(
    [
      { header: 'measure', value: (x: (typeof rows)[number]) => x.what },
      { header: 'value', value: (x) => x.value },
      { header: 'target', value: (x) => x.target },
      { header: 'met', value: (x) => x.met },
    ],
    rows,
  );
  const every = Math.max(1, Math.round(r.timeline.length / 15));
  // Windows of `every` samples: mean rates, the last lag and pending, the highest RSS.
  const windows: TimelineRow[] = [];
  for (let i = 0; i < r.timeline.length; i += every) {
    const w = r.timeline.slice(i, i + every);
    const mean = (f: (x: TimelineRow) => number) => w.reduce((sum, x) => sum + f(x), 0) / w.length;
    windows.push({
      second: w[w.length - 1].second,
      publishedPerS: mean((x) => x.publishedPerS),
      handledPerS: mean((x) => x.handledPerS),
      xackPerS: mean((x) => x.xackPerS),
      lag: w[w.length - 1].lag,
      pending: w[w.length - 1].pending,
      rssMb: Math.max(...w.map((x) => x.rssMb)),
    });
  }
  const timeline = renderTable(
    [
      { header: 'until s', value: (x: TimelineRow) => x.second },
      { header: 'published/s', value: (x) => Math.round(x.publishedPerS) },
      { header: 'handled/s', value: (x) => Math.round(x.handledPerS) },
      { header: 'XACK/s', value: (x) => x.xackPerS, digits: 1 },
      { header: 'lag', value: (x) => x.lag },
      { header: 'pending', value: (x) => x.pending },
      { header: 'max RSS MB', value: (x) => Math.round(x.rssMb) },
    ],
    windows,
  );
  return [
    `demo-ticks benchmark: ${r.options.symbols} symbols x ${r.options.ratePerSymbol}/s = ${r.targetRate} ticks/s for ${r.options.durationMs / 1000} s` +
      (r.options.oldSpaceMb || r.options.semiSpaceMb
        ? ` (consumer V8 flags:${r.options.oldSpaceMb ? ` --max-old-space-size=${r.options.oldSpaceMb}` : ''}${r.options.semiSpaceMb ? ` --max-semi-space-size=${r.options.semiSpaceMb}` : ''})`
        : '') +
      (r.options.from === 'dist'
        ? '; consumer and collector: the built app (dist)'
        : '; consumer and collector: TypeScript sources through scripts/register-ts.js') +
      (r.options.cpuProfile ? `; CPU profile of the consumer: ${r.options.cpuProfile}` : ''),
    formatEnvInfo(r.env),
    '',
    summary,
    '',
    `timeline (means over ${every} samples of ${r.options.sampleMs / 1000} s):`,
    timeline,
  ].join('\n');
}

// ---------------------------------------------------------------- CLI
