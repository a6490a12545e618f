import { median, quantile, renderTable } from './table';

describe('renderTable', () => {
  it('aligns text left and numbers right, with a dash for missing values', () => {
    const rows = [
      { name: 'raw', rate: 1234.5, note: undefined },
      { name: 'transport', rate: 98, note: 'ok' },
    ];
    const text = renderTable(
      [
        { header: 'name', value: (r: (typeof rows)[number]) => r.name },
        { header: 'msgs/s', value: (r: (typeof rows)[number]) => r.rate },
        { header: 'note', value: (r: (typeof rows)[number]) => r.note },
      ],
      rows,
    );
    expect(text.split('\n')).toEqual([
      'name         msgs/s  note',
      '---------  --------  ----',
      'raw        1,234.50  -',
      'transport        98  ok',
    ]);
  });
});

describe('quantile and median', () => {
  it('takes the nearest rank of a sorted array', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2);
    expect(quantile([1, 2, 3, 4], 0.99)).toBe(4);
    expect(quantile([], 0.5)).toBeNaN();
  });

  it('ignores non-finite values in the median', () => {
    expect(median([3, NaN, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });
});
