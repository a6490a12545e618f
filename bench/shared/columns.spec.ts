import { columns } from './columns';
import { renderTable } from './table';

describe('columns', () => {
  const rows = [{ name: 'a', p50: 1.234, n: 3 }];

  it('reads headers, fields, digits and computed columns from one spec', () => {
    const cols = columns<(typeof rows)[number]>('name, p50_ms=p50:1, n, twice', {
      twice: (r) => 2 * r.n,
    });
    expect(cols.map((c) => [c.header, c.digits])).toEqual([
      ['name', undefined],
      ['p50_ms', 1],
      ['n', undefined],
      ['twice', undefined],
    ]);
    expect(renderTable(cols, rows).split('\n')[2]).toBe('a        1.2  3      6');
  });

  it('throws on a field the rows do not have', () => {
    expect(() => renderTable(columns<(typeof rows)[number]>('nope'), rows)).toThrow(
      /no field nope/,
    );
  });
});
