/*
 * Table columns from one spec string instead of one object per column:
 * `'pattern, inst=instances, p50_ms=p50:2'`, each `header[=field][:digits]`, the field named by
 * the header when none is given; `computed` gives a header's value when it is not one field. A
 * row without a column's field throws, so a misspelt spec fails on its first render.
 */
import type { Cell, Column } from './table';

export function columns<Row extends object>(
  spec: string,
  computed: Record<string, (row: Row) => Cell> = {},
): Column<Row>[] {
  return spec.split(',').map((part) => {
    const m = /^([^=:]+)(?:=([^=:]+))?(?::(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`bad column "${part}"`);
    const [, header, field = header, digits] = m;
    const value =
      computed[header] ??
      ((row: Row) => {
        if (!(field in row)) throw new Error(`column ${header}: rows have no field ${field}`);
        return (row as Record<string, Cell>)[field];
      });
    return { header, value, digits: digits === undefined ? undefined : Number(digits) };
  });
}
