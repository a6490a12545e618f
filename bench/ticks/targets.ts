/*
 * The targets of bench:ticks from the measured rows: the median over the runs in which the rows a
 * target compares (the library's and the raw loop's or the plain transport's) had the machine to
 * themselves; over every run when none did.
 */
import { SHARED_CPU_PCT } from '../shared/other-cpu';
import { fmt, median } from '../shared/table';
import { Target } from '../shared/targets';
import type { TicksBenchOptions } from './options';
import type { Mode, Variant } from './protocol';
import { isOk, Row } from './rows';

export const sharedMachine = (r: Row) => (r.otherCpuPct ?? 0) > SHARED_CPU_PCT;

export function evaluateTargets(rows: Row[], o: TicksBenchOptions): Target[] {
  const out: Target[] = [];
  /** Per run: the row of `variant` and the row it is compared with (`other`), same mode and run. */
  const runsOf = (mode: Mode, variant: Variant, other: Variant) => {
    const all: { lib: Row; other: Row }[] = [];
    for (const lib of rows)
      if (lib.mode === mode && lib.variant === variant && lib.run !== 'median') {
        const cmp = rows.find((r) => r.mode === mode && r.variant === other && r.run === lib.run);
        if (cmp) all.push({ lib, other: cmp });
      }
    const clean = all.filter((x) => !sharedMachine(x.lib) && !sharedMachine(x.other));
    const used = clean.length > 0 ? clean : all;
    const left = all.length - clean.length;
    const note =
      used.length === 0 || left === 0
        ? ''
        : clean.length === 0
          ? ' [every run shared the machine]'
          : ` [${clean.length} of ${all.length} runs; ${left} left out: machine shared]`;
    return { used, note };
  };
  const perRun = (xs: number[], f: (x: number) => string) =>
    xs.length > 1 ? ` (runs: ${xs.map(f).join(' / ')})` : '';
  const notRun = (text: string) => out.push({ text, measured: '-', baseline: '-', met: null });
  const x2 = (x: number) => `${x.toFixed(2)}x`;
  const med = <T>(xs: T[], f: (x: T) => number) => median(xs.map(f));
  const drain = `drain of a ${fmt(o.messages + Math.round(o.rate * o.warmup))} backlog`;

  const ofRawTarget = (variant: Variant, what: string, min: number) => {
    const text = `${drain}, ${what}: >= ${min * 100} % of the raw loop's msgs/s`;
    const { used, note } = runsOf('drain', variant, 'raw');
    if (used.length === 0) return notRun(text);
    const ratios = used.map((x) => x.lib.msgsPerSec / x.other.msgsPerSec);
    const m = median(ratios);
    const p = (x: number) => `${(x * 100).toFixed(0)} %`;
    out.push({
      text,
      measured: `${fmt(med(used, (x) => x.lib.msgsPerSec))} msgs/s = ${p(m)}${perRun(ratios, p)}${note}`,
      baseline: `${fmt(med(used, (x) => x.other.msgsPerSec))} msgs/s`,
      met: m >= min,
    });
  };
  ofRawTarget('batch-handler', 'plain batch handler', 0.85);
  ofRawTarget('idem-memory', 'batch handler + idempotency (memory L1)', 0.85);
  ofRawTarget('idem-redis', 'batch handler + idempotency (L1 + L2)', 0.6);
  ofRawTarget('batch', 'per-message handler', 0.75);
  ofRawTarget('batch-idem-redis', 'per-message handler + idempotency (L1 + L2)', 0.5);

  const redisCpu = `${drain}, batch handler + idempotency (L1 + L2): Redis CPU per message <= 2.5x the raw loop's`;
  const { used: drained, note: drainNote } = runsOf('drain', 'idem-redis', 'raw');
  const measured = drained.filter(
    (x) => x.lib.redisCpuUsPerMsg !== undefined && x.other.redisCpuUsPerMsg !== undefined,
  );
  if (measured.length === 0) notRun(redisCpu);
  else {
    const ratios = measured.map((x) => x.lib.redisCpuUsPerMsg! / x.other.redisCpuUsPerMsg!);
    const m = median(ratios);
    const perM = (f: (x: { lib: Row; other: Row }) => number) =>
      `${fmt(med(measured, f), 2)} s per 1M`;
    out.push({
      text: redisCpu,
      measured: `${perM((x) => x.lib.redisCpuUsPerMsg!)} = ${x2(m)}${perRun(ratios, x2)}${drainNote}`,
      baseline: perM((x) => x.other.redisCpuUsPerMsg!),
      met: m <= 2.5,
    });
  }

  const fixed = `${fmt(o.rate)} msgs/s for ${o.duration} s, idempotency (L1 + L2)`;
  const againstRaw = runsOf('fixed', 'idem-redis', 'raw');
  const allOnce = rows
    .filter((r) => r.mode === 'fixed' && r.variant === 'idem-redis' && r.run !== 'median')
    .every(isOk);
  const fixedTarget = (
    what: string,
    value: (r: Row) => number,
    ok: (v: number) => boolean,
    show: (v: number) => string,
    extra = '',
  ) => {
    const text = `${fixed}: ${what}`;
    const { used, note } = againstRaw;
    if (used.length === 0) return notRun(text);
    const values = used.map((x) => value(x.lib));
    const v = median(values);
    out.push({
      text,
      measured: `${show(v)}${extra}${perRun(values, show)}${note}`,
      baseline: show(med(used, (x) => value(x.other))),
      met: ok(v),
    });
  };
  fixedTarget(
    `keeps up (>= 98 % of ${fmt(o.rate)} msgs/s, every message handled once)`,
    (r) => r.msgsPerSec,
    // Exactly once in every run, shared machine or not.
    (v) => v >= 0.98 * o.rate && allOnce,
    (v) => `${fmt(v)} msgs/s`,
    allOnce ? ', all handled once' : ', NOT all handled once',
  );
  fixedTarget(
    'e2e p99 < 25 ms',
    (r) => r.p99,
    (v) => v < 25,
    (v) => `${fmt(v, 2)} ms`,
  );

  const cpu = `${fixed}: CPU per 100k messages <= 2x the plain transport's (batch handler)`;
  const { used, note } = runsOf('fixed', 'idem-redis', 'batch-handler');
  if (used.length === 0) notRun(cpu);
  else {
    const ratios = used.map((x) => x.lib.cpuMsPer100k / x.other.cpuMsPer100k);
    const m = median(ratios);
    const raw = runsOf('fixed', 'raw', 'raw').used.map((x) => x.lib.cpuMsPer100k);
    const ms = (f: (x: { lib: Row; other: Row }) => number) => `${fmt(med(used, f))} ms`;
    out.push({
      text: cpu,
      measured: `${ms((x) => x.lib.cpuMsPer100k)} = ${x2(m)} plain (${ms((x) => x.other.cpuMsPer100k)})${perRun(ratios, x2)}${note}`,
      baseline: raw.length === 0 ? '-' : `${fmt(median(raw))} ms`,
      met: m <= 2,
    });
  }
  fixedTarget(
    'XACK calls <= 2.5 per 1000 messages',
    (r) => r.xackPer1000,
    (v) => v <= 2.5,
    (v) => fmt(v, 2),
  );
  return out;
}
