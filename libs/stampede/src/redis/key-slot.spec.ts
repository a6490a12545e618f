import { bySlot, keySlot } from './key-slot';

// The slot function ioredis routes with (a dependency of ioredis, without types).
const calculateSlot = require('cluster-key-slot') as (key: string) => number;

describe('keySlot', () => {
  it('is the slot Redis Cluster computes (checked against cluster-key-slot, which ioredis uses)', () => {
    const keys = [
      '',
      'a',
      'foo',
      '123456789',
      'stampede:{product:1}',
      'x{}y',
      'ü{ñ}',
      '{a',
      'a}{b}',
    ];
    for (let i = 0; i < 200; i++) keys.push(`p:{item:${i}}`, `plain-${i * 7919}`);
    for (const key of keys) expect(keySlot(key)).toBe(calculateSlot(key));
  });

  it('the known vector: "123456789" is CRC16 0x31C3, slot 12739', () => {
    expect(keySlot('123456789')).toBe(0x31c3 % 16384);
  });

  it('an empty first hash tag hashes the whole key, as Redis does (keyHashSlot in cluster.c)', () => {
    expect(keySlot('{}{a}')).not.toBe(keySlot('a'));
    expect(keySlot('x{}y')).toBe(calculateSlot('x{}y'));
  });

  it('groups keys by slot, keeping their order', () => {
    const keys = ['{a}1', '{b}1', '{a}2', '{b}2', '{a}3'];
    const groups = bySlot(keys);
    expect(groups).toHaveLength(2);
    expect(groups).toContainEqual([0, 2, 4]);
    expect(groups).toContainEqual([1, 3]);
  });
});
