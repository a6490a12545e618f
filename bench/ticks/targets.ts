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

/**
 * The targets of the issue ("Targets (in npm run bench:ticks ...)"), from the measured rows: the
 * median over the runs in which the rows a target compares (the library's and the raw loop's or
 * the plain transport's) had the machine to themselves; over every run when none did.
 */
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
    const note =
      used.length === 0
        ? ''
        : clean.length === 0
          ? ' [every run shared the machine]'
          : clean.length < all.length
            ? ` [${clean.length} of ${all.length} runs; ${all.length - clean.length} left out: machine shared]`
            : '';
    return { used, note };
  };
  const perRun = (xs: number[], f: (x: number) => string) =>
    xs.length > 1 ? ` (runs: ${xs.map(f).join(' / ')})` : '';
  const notRun = (target: string) =>
    out.push({ text: target, measured: '-', baseline: '-', met: null });
  const drain = `drain of a ${fmt(o.messages + Math.round(o.rate * o.warmupS))} backlog`;

  const ofRawTarget = (variant: Variant, what: string, min: number) => {
    const target = `${drain}, ${what}: >= ${min * 100} % of the raw loop's msgs/s`;
    const { used, note } = runsOf('drain', variant, 'raw');
    if (used.length === 0) return notRun(target);
    const ratios = used.map((x) => x.lib.msgsPerSec / x.other.msgsPerSec);
    const m = median(ratios);
    out.push({
      text: target,
      measured: `${fmt(median(used.map((x) => x.lib.msgsPerSec)))} msgs/s = ${(m * 100).toFixed(0)} %${perRun(ratios, (x) => `${(x * 100).toFixed(0)} %`)}${note}`,
      baseline: `${fmt(median(used.map((x) => x.other.msgsPerSec)))} msgs/s`,
      met: m >= min,
    });
  };
  ofRawTarget('batch-handler', 'plain batch handler', 0.85);
  ofRawTarget('idem-memory', 'batch handler + idempotency (memory L1)', 0.85);
  ofRawTarget('idem-redis', 'batch handler + idempotency (L1 + L2)', 0.6);
  ofRawTarget('batch', 'per-message handler', 0.75);
  ofRawTarget('batch-idem-redis', 'per-message handler + idempotency (L1 + L2)', 0.5);
  {
    const target = `${drain}, batch handler + idempotency (L1 + L2): Redis CPU per message <= 2.5x the raw loop's`;
    const { used, note } = runsOf('drain', 'idem-redis', 'raw');
    const measured = used.filter(
      (x) => x.lib.redisCpuUsPerMsg !== undefined && x.other.redisCpuUsPerMsg !== undefined,
    );
    if (measured.length === 0) notRun(target);
    else {
      const ratios = measured.map((x) => x.lib.redisCpuUsPerMsg! / x.other.redisCpuUsPerMsg!);
      const m = median(ratios);
      const perM = (xs: number[]) => `${fmt(median(xs), 2)} s per 1M`;
      out.push({
        text: target,
        measured: `${perM(measured.map((x) => x.lib.redisCpuUsPerMsg!))} = ${m.toFixed(2)}x${perRun(ratios, (x) => `${x.toFixed(2)}x`)}${note}`,
        baseline: perM(measured.map((x) => x.other.redisCpuUsPerMsg!)),
        met: m <= 2.5,
      });
    }
  }

  const fixed = `${fmt(o.rate)} msgs/s for ${o.durationS} s, idempotency (L1 + L2)`;
  const againstRaw = runsOf('fixed', 'idem-redis', 'raw');
  const allFixedIdem = rows.filter(
    (r) => r.mode === 'fixed' && r.variant === 'idem-redis' && r.run !== 'median',
  );
  const fixedTarget = (
    what: string,
    value: (r: Row) => number,
    ok: (v: number, rows: Row[]) => boolean,
    show: (v: number) => string,
    extra: (rows: Row[]) => string = () => '',
  ) => {
    const target = `${fixed}: ${what}`;
    const { used, note } = againstRaw;
    if (used.length === 0) return notRun(target);
    const libRows = used.map((x) => x.lib);
    const values = libRows.map(value);
    const v = median(values);
    out.push({
      text: target,
      measured: `${show(v)}${extra(libRows)}${perRun(values, show)}${note}`,
      baseline: show(median(used.map((x) => value(x.other)))),
      met: ok(v, libRows),
    });
  };
  fixedTarget(
    `keeps up (>= 98 % of ${fmt(o.rate)} msgs/s, every message handled once)`,
    (r) => r.msgsPerSec,
    // Exactly once in every run, shared machine or not.
    (v) => v >= 0.98 * o.rate && allFixedIdem.every(isOk),
    (v) => `${fmt(v)} msgs/s`,
    () => (allFixedIdem.every(isOk) ? ', all handled once' : ', NOT all handled once'),
  );
  fixedTarget(
    'e2e p99 < 25 ms',
    (r) => r.p99,
    (v) => v < 25,
    (v) => `${fmt(v, 2)} ms`,
  );
  {
    const target = `${fixed}: CPU per 100k messages <= 2x the plain transport's (batch handler)`;
    const { used, note } = runsOf('fixed', 'idem-redis', 'batch-handler');
    if (used.length === 0) notRun(target);
    else {
      const ratios = used.map((x) => x.lib.cpuMsPer100k / x.other.cpuMsPer100k);
      const m = median(ratios);
      const raw = runsOf('fixed', 'raw', 'raw').used.map((x) => x.lib.cpuMsPer100k);
      out.push({
        text: target,
        measured: `${fmt(median(used.map((x) => x.lib.cpuMsPer100k)))} ms = ${m.toFixed(2)}x plain (${fmt(median(used.map((x) => x.other.cpuMsPer100k)))} ms)${perRun(ratios, (x) => `${x.toFixed(2)}x`)}${note}`,
        baseline: raw.length === 0 ? '-' : `${fmt(median(raw))} ms`,
        met: m <= 2,
      });
    }
  }
  fixedTarget(
    'XACK calls <= 2.5 per 1000 messages',
    (r) => r.xackPer1000,
    (v) => v <= 2.5,
    (v) => fmt(v, 2),
  );
  return out;
}
