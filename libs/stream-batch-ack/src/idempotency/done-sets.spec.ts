import { bySlice, compareIds, doneSlice } from './done-sets';

describe('done sets of entry ids', () => {
  it('compareIds orders entry ids as Redis does, past the precision of a double', () => {
    const ordered = [
      '0-1',
      '5-0',
      '5-9',
      '5-10',
      '1700000000000-0',
      '1700000000000-2',
      '1700000000000-10',
      '1700000000001-0',
      '18446744073709551614-18446744073709551614',
      '18446744073709551614-18446744073709551615',
      '18446744073709551615-0',
    ];
    for (let i = 0; i < ordered.length; i++)
      for (let j = 0; j < ordered.length; j++)
        expect([ordered[i], ordered[j], Math.sign(compareIds(ordered[i], ordered[j]))]).toEqual([
          ordered[i],
          ordered[j],
          Math.sign(i - j),
        ]);
    expect(compareIds('7', '7-0')).toBe(0);
  });

  it('slices ids by 100 ms, and by 100,000 sequence numbers within one ms', () => {
    expect(doneSlice('1700000000099-3')).toBe('17000000000');
    expect(doneSlice('1700000000100-0')).toBe('17000000001');
    expect(doneSlice('5-99999')).toBe('0');
    expect(doneSlice('5-100000')).toBe('0.1');
    expect(doneSlice('5-250000')).toBe('0.2');
    expect(doneSlice('x-1')).toBe('?');
    const ids = ['1700000000099-0', '1700000000100-0', '1700000000099-1', '1700000000150-0'];
    expect([...bySlice(ids, [0, 1, 2, 3])]).toEqual([
      ['17000000000', [0, 2]],
      ['17000000001', [1, 3]],
    ]);
    const crowded = ['5-99998', '5-99999', '5-100000', '5-100001', '5-200000', '6-1'];
    expect([...bySlice(crowded, [0, 1, 2, 3, 4, 5])]).toEqual([
      ['0', [0, 1, 5]],
      ['0.1', [2, 3]],
      ['0.2', [4]],
    ]);
  });
});
