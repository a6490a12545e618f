import { keySlot } from './key-slot';

// The slot function ioredis routes with (a dependency of ioredis, without types).
const calculateSlot = require('cluster-key-slot') as (key: string) => number;

describe('keySlot (Redis Cluster hash slots)', () => {
  it('matches the slots Redis computes (CLUSTER KEYSLOT)', () => {
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('123456789')).toBe(12739); // CRC16/XMODEM check value 0x31C3
    expect(keySlot('')).toBe(0);
  });

  it('hashes only the hash tag when there is a non-empty one', () => {
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
  });

  it('an empty first tag: Redis hashes the whole key, and looks for no later tag', () => {
    expect(keySlot('foo{}{bar}')).toBe(8363);
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('{bar'));
    expect(keySlot('a{}b}')).toBe(14284); // the whole key, not `b`
  });

  it('agrees with cluster-key-slot (what ioredis routes with) everywhere else', () => {
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
});
