import { renderTable } from './table';

export interface Target {
  id?: string;
  text: string;
  measured: string;
  /** What the measured value was compared with (e.g. the raw loop's value of the same runs). */
  baseline?: string;
  /** null: not run, or not measurable here. */
  met: boolean | null;
}

export function verdict(t: Target, notRun = 'not run'): string {
  return t.met === null ? notRun : t.met ? 'met' : 'NOT MET';
}

export function renderTargets(
  targets: Target[],
  headers: { measured?: string; baseline?: string } = {},
): string {
  return renderTable(
    [
      { header: 'target', value: (t: Target) => t.text },
      { header: headers.measured ?? 'measured', value: (t: Target) => t.measured },
      ...(headers.baseline
        ? [{ header: headers.baseline, value: (t: Target) => t.baseline ?? '-' }]
        : []),
      { header: 'verdict', value: (t: Target) => verdict(t) },
    ],
    targets,
  );
}

/** One line per target: `MET     [id] text: measured`. */
export function formatTargetLine(t: Target): string {
  const v = t.met === null ? 'N/A    ' : t.met ? 'MET    ' : 'NOT MET';
  return `${v} ${t.id ? `[${t.id}] ` : ''}${t.text}: ${t.measured}`;
}
