import { editDistance, nearestName } from './nearest-name';

describe('editDistance', () => {
  it.each<[string, string, number]>([
    ['', '', 0],
    ['abc', 'abc', 0],
    ['', 'abc', 3],
    ['abc', '', 3],
    ['kitten', 'sitting', 3],
    ['flaw', 'lawn', 2],
    ['deadletter', 'deadLetter', 1],
    ['ack', 'acks', 1],
  ])('%j -> %j: %d', (a, b, distance) => {
    expect(editDistance(a, b)).toBe(distance);
    expect(editDistance(b, a)).toBe(distance);
  });
});

describe('nearestName', () => {
  const options = ['connection', 'group', 'deadLetter', 'idempotency', 'read', 'retry'];

  it('a different case is the nearest of all', () => {
    expect(nearestName('deadletter', options)).toBe('deadLetter');
    expect(nearestName('DEADLETTER', options)).toBe('deadLetter');
  });

  it('finds small misspellings', () => {
    expect(nearestName('dead_letter', options)).toBe('deadLetter');
    expect(nearestName('idempotence', options)).toBe('idempotency');
    expect(nearestName('conection', options)).toBe('connection');
    expect(nearestName('reed', options)).toBe('read');
    expect(nearestName('maxDelivery', ['maxDeliveries', 'maxLen', 'stream'])).toBe('maxDeliveries');
  });

  it('a name that a candidate begins with (a unit left out)', () => {
    expect(nearestName('ttl', ['store', 'ttlMs', 'lockMs'])).toBe('ttlMs');
    expect(nearestName('groupInfoInterval', ['groupInfoIntervalMs'])).toBe('groupInfoIntervalMs');
    expect(nearestName('ma', ['maxLen'])).toBeUndefined(); // too short to tell
  });

  it('suggests nothing for a name unlike every candidate', () => {
    expect(nearestName('timeout', options)).toBeUndefined();
    expect(nearestName('x', options)).toBeUndefined();
    expect(nearestName('anything', [])).toBeUndefined();
  });

  it('equally near candidates: the first one listed', () => {
    expect(nearestName('rxad', ['read', 'rxab'])).toBe('read');
  });
});
