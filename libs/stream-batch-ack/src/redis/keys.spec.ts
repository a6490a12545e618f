import { groupStreamsForReading, keySlot } from './keys';

describe('keySlot (Redis Cluster hash slots)', () => {
  it('matches the slots Redis computes (CLUSTER KEYSLOT)', () => {
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('123456789')).toBe(12739); // CRC16/XMODEM check value 0x31C3
    expect(keySlot('')).toBe(0);
  });

  it('hashes only the hash tag when there is a non-empty one', () => {
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    // An empty first tag: Redis hashes the whole key, and looks for no later tag.
    expect(keySlot('foo{}{bar}')).toBe(8363);
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('{bar'));
    expect(keySlot('a{}b}')).toBe(14284); // the whole key, not `b`
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
  });
});

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
