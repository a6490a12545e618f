/* One measured row of bench:ticks, how rows relate (% of raw, CPU vs plain, medians of runs), and the tables' columns. */
import { columns as specColumns } from '../shared/columns';
import { Column, median } from '../shared/table';
import type { TicksBenchOptions } from './options';
import { Mode, PLAIN_OF, Variant } from './protocol';
import type { runOne } from './run-one';

export type Row = Omit<Awaited<ReturnType<typeof runOne>>, 'run'> & {
  /** The run number, or 'median' for the median of the runs of one mode and variant. */
  run: number | 'median';
  /** drain and max modes: msgsPerSec / the raw row's of the same run. */
  ofRaw?: number;
  /** Idempotent variants: cpuMsPer100k / their plain variant's (PLAIN_OF) of the same run. */
  cpuVsPlain?: number;
  /** drain: redisCpuUsPerMsg / the raw row's of the same run. */
  redisCpuVsRaw?: number;
};

export const LABEL: Record<Variant, string> = {
  'per-message': 'transport, per-message ack (batchSize 1)',
  batch: 'transport, per-message handler, batch ack',
  'batch-idem-redis': 'per-message handler + idempotency (L1 + Redis L2)',
  'batch-handler': 'transport, batch handler',
  'idem-memory': 'batch handler + idempotency (memory L1)',
  'idem-redis': 'batch handler + idempotency (L1 + Redis L2)',
  raw: 'raw ioredis loop (ceiling)',
  'raw-idem': 'raw loop + IdempotencyStore (L1 + L2)',
};

export const modeLabel = (mode: Mode, o: TicksBenchOptions) =>
  mode === 'fixed' ? `fixed ${o.rate}/s` : `${mode} ${o.messages}`;

export const isOk = (r: Row) =>
  r.complete && r.missing + r.duplicates + r.pendingAfter + r.failedOrSkipped === 0;

const times = (x: number | undefined) => (x === undefined ? null : `${x.toFixed(2)}x`);
const pctOf = (x: number | undefined) => (x === undefined ? null : `${x.toFixed(0)} %`);

export function columns(o: TicksBenchOptions): Column<Row>[] {
  const batch = `${LABEL.batch} (${o['batch-size']}/${o.interval} ms)`;
  return specColumns<Row>(
    'mode, consumer, run, msgs/s, % of raw, p50 ms=p50:2, p99 ms=p99:2, max ms=max:1, XACK/1k=xackPer1000:2, ' +
      'Lua/1k=scriptsPer1000:2, consumer cmds/msg=consumerCmdsPerMsg:3, CPU ms/100k=cpuMsPer100k:0, CPU vs plain, ' +
      "Redis ms/100k=redisMsPer100k:0, Redis CPU s/1M:2, Redis CPU vs raw, avg batch:0, peak RSS MB=peakRssMb:0, loop delay p99/max ms, others' CPU, check",
    {
      mode: (r) => modeLabel(r.mode, o),
      consumer: (r) =>
        (r.variant === 'batch' ? batch : LABEL[r.variant]) + (r.otel ? `, otel ${r.otel}` : ''),
      run: (r) => String(r.run),
      'msgs/s': (r) => Math.round(r.msgsPerSec),
      '% of raw': (r) => pctOf(r.ofRaw && r.ofRaw * 100),
      'CPU vs plain': (r) => times(r.cpuVsPlain),
      'Redis CPU s/1M': (r) => r.redisCpuUsPerMsg ?? null,
      'Redis CPU vs raw': (r) => times(r.redisCpuVsRaw),
      'avg batch': (r) => r.avgBatch ?? null,
      'loop delay p99/max ms': (r) => `${r.loopDelayP99.toFixed(0)} / ${r.loopDelayMax.toFixed(0)}`,
      "others' CPU": (r) => pctOf(r.otherCpuPct),
      check: (r) =>
        isOk(r)
          ? 'ok'
          : `missing ${r.missing}, dup ${r.duplicates}, pending ${r.pendingAfter}, failed/skipped ${r.failedOrSkipped}${r.complete ? '' : ', timed out'}`,
    },
  );
}

/** Counts that should be 0 in every run: a median row shows their worst run. */
const WORST_OF_RUNS = new Set(['pendingAfter', 'missing', 'duplicates', 'failedOrSkipped']);

/**
 * Per mode, variant and OpenTelemetry setup with several runs: a row of the medians of its runs
 * (per command for the command counts), complete when every run was.
 */
export function medianRows(rows: Row[]): Row[] {
  const groups = new Map<string, Row[]>();
  for (const r of rows) {
    const key = `${r.mode}\u0000${r.variant}\u0000${r.otel ?? ''}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  const medianOf = (values: unknown[], key: string): unknown => {
    const numbers = values.filter((x): x is number => typeof x === 'number');
    if (numbers.length > 0) return WORST_OF_RUNS.has(key) ? Math.max(...numbers) : median(numbers);
    const maps = values as Record<string, number>[];
    const names = [...new Set(maps.flatMap((x) => Object.keys(x)))];
    return Object.fromEntries(names.map((k) => [k, median(maps.map((x) => x[k] ?? 0))]));
  };
  return [...groups.values()]
    .filter((group) => group.length > 1)
    .map((group) => {
      const row: Record<string, unknown> = { ...group[0] };
      for (const key of new Set(group.flatMap((r) => Object.keys(r)))) {
        const values = group.map((r) => (r as unknown as Record<string, unknown>)[key]);
        const defined = values.filter((x) => x !== undefined);
        if (defined.some((x) => typeof x === 'number' || (typeof x === 'object' && x !== null)))
          row[key] = medianOf(defined, key);
      }
      const complete = group.every((r) => r.complete);
      return { ...(row as unknown as Row), run: 'median', complete, profile: undefined };
    });
}

/** Fills in "% of raw" (drain, max) and "CPU vs plain" (idempotent variants) from the rows of the same run. */
export function relate(runRows: Row[]): void {
  const raw = runRows.find((r) => r.variant === 'raw');
  for (const r of runRows) {
    if (r.mode !== 'fixed' && raw) r.ofRaw = r.msgsPerSec / raw.msgsPerSec;
    if (raw?.redisCpuUsPerMsg && r.redisCpuUsPerMsg !== undefined)
      r.redisCpuVsRaw = r.redisCpuUsPerMsg / raw.redisCpuUsPerMsg;
    const plain = runRows.find(
      (p) =>
        p.variant === PLAIN_OF[r.variant] && (p.otel === r.otel || p.variant.startsWith('raw')),
    );
    if (plain) r.cpuVsPlain = r.cpuMsPer100k / plain.cpuMsPer100k;
  }
}

export const LEGEND = [
  'msgs/s: consumer throughput (handled / time from first to last handled message). % of raw',
  "(drain, max): msgs/s / the raw loop's of the same run. e2e latency: handler time minus the",
  "producer's send time (performance.timeOrigin + performance.now() on both sides). XACK/1k, Lua/1k",
  '(EVALSHA + EVAL: the idempotency scripts) and consumer cmds/msg (every command but XADD): from',
  'INFO commandstats, over every message sent (warm-up included). CPU ms/100k: consumer user + system',
  'CPU per 100,000 measured messages. CPU vs plain: this row / the batch handler row of the same run',
  "(raw-idem: / the raw row). Redis ms/100k: time Redis spent executing the consumer's commands",
  '(commandstats usec, XADD excluded). Redis CPU s/1M (drain): CPU time of the redis-server process',
  "(INFO CPU, user + system) from the consumer's start to its stop, per 1M messages; vs raw: / the",
  "raw row's of the same run. avg batch: entries per handler call (server.metrics()).",
  "others' CPU: CPU used by processes outside the benchmark during the row (100 % = one core of 2):",
  'above a few % the row shared the machine and its throughput and tails are not this code alone.',
  'check: every message handled exactly once, none pending, none failed or skipped.',
  'Rows "median": the median of each column over the runs.',
];

const per100k = (r: Row, cmds: string[]) => {
  const usec = cmds.reduce((a, c) => a + (r.commandUsec[c] ?? 0), 0);
  return r.sent > 0 ? (usec / 1000 / r.sent) * 100_000 : NaN;
};
const sum = (m: Record<string, number>, keys: string[]) =>
  keys.reduce((a, k) => a + (m[k] ?? 0), 0);
const SCRIPTS = ['evalsha', 'eval'];

/** Where Redis spent its time on each row: the stream commands, the idempotency scripts. */
export const REDIS_COLUMNS: Column<Row>[] = [
  { header: 'mode', value: (r) => r.mode },
  { header: 'consumer', value: (r) => r.variant },
  { header: 'run', value: (r) => String(r.run) },
  { header: 'XREADGROUP', value: (r) => per100k(r, ['xreadgroup']), digits: 0 },
  { header: 'XACK', value: (r) => per100k(r, ['xack']), digits: 0 },
  { header: 'EVALSHA/EVAL', value: (r) => per100k(r, SCRIPTS), digits: 0 },
  {
    header: 'µs per script call',
    value: (r) => {
      const calls = sum(r.commands, SCRIPTS);
      return calls > 0 ? sum(r.commandUsec, SCRIPTS) / calls : null;
    },
    digits: 0,
  },
  { header: 'all but XADD', value: (r) => r.redisMsPer100k, digits: 0 },
  {
    header: 'Redis busy on them while measured',
    value: (r) => `${(((r.redisMsPer100k / 100_000) * r.msgsPerSec) / 10).toFixed(0)} %`,
  },
];

/** An --otel row with its msgs/s and CPU / the `none` row's of the same mode, variant and run. */
export type OtelCostRow = { row: Row; throughput?: number; cpu?: number };

export function otelCostRows(rows: Row[], medians: Row[]): OtelCostRow[] {
  const all = [...rows, ...medians].filter((r) => r.otel !== undefined);
  return all.map((row) => {
    const base = all.find(
      (b) =>
        b.otel === 'none' && b.mode === row.mode && b.variant === row.variant && b.run === row.run,
    );
    if (!base) return { row };
    const cpu = row.cpuMsPer100k / base.cpuMsPer100k;
    return { row, throughput: row.msgsPerSec / base.msgsPerSec, cpu };
  });
}

const pct = (x: number | undefined) =>
  x === undefined ? null : `${x >= 1 ? '+' : ''}${((x - 1) * 100).toFixed(1)} %`;

export const OTEL_COLUMNS: Column<OtelCostRow>[] = [
  { header: 'mode', value: (c) => c.row.mode },
  { header: 'consumer', value: (c) => LABEL[c.row.variant] },
  { header: 'otel', value: (c) => c.row.otel ?? '' },
  { header: 'run', value: (c) => String(c.row.run) },
  { header: 'msgs/s', value: (c) => Math.round(c.row.msgsPerSec) },
  { header: 'msgs/s vs none', value: (c) => pct(c.throughput) },
  { header: 'CPU ms/100k', value: (c) => c.row.cpuMsPer100k, digits: 0 },
  { header: 'CPU vs none', value: (c) => pct(c.cpu) },
  { header: 'check', value: (c) => (isOk(c.row) ? 'ok' : 'NOT ok') },
];

export const OTEL_LEGEND =
  'otel: none = @opentelemetry/api not resolvable in the consumer; api = the API without an SDK; ' +
  'sdk-metrics = MeterProvider + Prometheus exporter only; sdk = MeterProvider + Prometheus exporter (one collection at the end) + tracer provider, batch span processor, ' +
  'no-op exporter. Targets: api >= -2 % msgs/s, sdk >= -10 % msgs/s vs none (medians with --repeat).';
