/** Aligned plain-text tables: text columns left-aligned, numbers right-aligned. */
export type Cell = string | number | null | undefined;

export interface Column<Row> {
  header: string;
  value: (row: Row) => Cell;
  /** Digits after the point for numbers (default 0 for integers, 2 otherwise). */
  digits?: number;
}

export function formatCell(value: Cell, digits?: number): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'string') return value;
  if (!Number.isFinite(value)) return String(value);
  const d = digits ?? (Number.isInteger(value) ? 0 : 2);
  return value.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
}

export function renderTable<Row>(columns: Column<Row>[], rows: Row[]): string {
  const cells = rows.map((row) => columns.map((c) => formatCell(c.value(row), c.digits)));
  const numeric = columns.map((c) => rows.every((row) => typeof c.value(row) !== 'string'));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i].length)));
  const line = (parts: string[]) =>
    parts
      .map((p, i) => (numeric[i] ? p.padStart(widths[i]) : p.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [
    line(columns.map((c) => c.header)),
    line(widths.map((w) => '-'.repeat(w))),
    ...cells.map(line),
  ].join('\n');
}

/** Quantile (0..1) of an ascending-sorted array, nearest-rank. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** Median of the finite values (NaN when there are none). */
export function median(xs: number[]): number {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** A number with thousands separators and `digits` decimals. */
export const fmt = (n: number, digits = 0): string =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
