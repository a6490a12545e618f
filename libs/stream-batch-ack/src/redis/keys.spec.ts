import { groupStreamsForReading } from './keys';

describe('groupStreamsForReading', () => {
  it('a single Redis: all streams in one XREADGROUP call', () => {
    expect(groupStreamsForReading(['a', 'b', 'c'], false)).toEqual([['a', 'b', 'c']]);
    expect(groupStreamsForReading([], false)).toEqual([]);
  });

  it('a Cluster: one group per hash slot, streams sharing a slot together, order kept', () => {
    const groups = groupStreamsForReading(['{t}:a', 'x', '{t}:b', 'y', 'x2{x}'], true);
    expect(groups).toEqual(expect.arrayContaining([['{t}:a', '{t}:b'], ['x', 'x2{x}'], ['y']]));
    expect(groups).toHaveLength(3);
  });
});
