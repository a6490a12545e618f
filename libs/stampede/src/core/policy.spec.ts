import { toMs } from './duration';
import { StampedeConfigError } from './errors';
import { resolvePolicy } from './policy';

describe('toMs', () => {
  it.each([
    [1500, 1500],
    ['250ms', 250],
    ['30s', 30_000],
    ['5m', 300_000],
    ['1h', 3_600_000],
    ['1.5s', 1500],
  ])('%p -> %p ms', (input, ms) => expect(toMs(input, 'ttl')).toBe(ms));

  it.each([[-1], [0], ['soon'], ['10 years'], [NaN], [Infinity]])('rejects %p', (input) => {
    expect(() => toMs(input as number, 'ttl')).toThrow(StampedeConfigError);
  });
});

describe('resolvePolicy', () => {
  it('fills defaults', () => {
    expect(resolvePolicy({ lock: true, xfetch: true, jitter: {} }, 60_000, 'X.y')).toEqual({
      cache: true,
      ttl: 60_000,
      cacheNull: true,
      singleFlight: true,
      xfetch: { beta: 1 },
      lock: { ttl: 5000, poll: 2, wait: 10_000, autoExtend: false },
      jitter: { ratio: 0.1 },
      grace: 0,
      graceBackoff: 1000,
      l1: true,
    });
  });

  it('single-flight by default for cached calls; an explicit false opts out', () => {
    expect(resolvePolicy({}, 1000, 'X.y').singleFlight).toBe(true);
    expect(resolvePolicy({ cache: true }, 1000, 'X.y').singleFlight).toBe(true);
    expect(resolvePolicy({ cache: true, singleFlight: false }, 1000, 'X.y').singleFlight).toBe(
      false,
    );
    expect(resolvePolicy({ cache: false }, 1000, 'X.y').singleFlight).toBe(false);
    expect(resolvePolicy({ cache: false, singleFlight: true }, 1000, 'X.y').singleFlight).toBe(
      true,
    );
  });

  it('grace, timeouts and tags', () => {
    expect(
      resolvePolicy(
        { grace: '1m', graceBackoff: 500, timeout: { soft: 100, hard: '2s' }, tags: ['a', 'b'] },
        1000,
        'A.b',
      ),
    ).toMatchObject({
      grace: 60_000,
      graceBackoff: 500,
      timeout: { soft: 100, hard: 2000 },
      tags: ['a', 'b'],
    });
    expect(resolvePolicy({ timeout: '3s' }, 1000, 'A.b').timeout).toEqual({ hard: 3000 });
    expect(() => resolvePolicy({ grace: 0 }, 1000, 'A.b')).toThrow(
      /^A\.b: grace must be a positive duration/,
    );
    expect(() => resolvePolicy({ grace: 'soon' }, 1000, 'A.b')).toThrow(/^A\.b: grace: "soon"/);
    expect(() =>
      resolvePolicy({ grace: '1m', timeout: { soft: 300, hard: 200 } }, 1000, 'A.b'),
    ).toThrow(/^A\.b: timeout.soft \(300 ms\) is longer than timeout.hard \(200 ms\)/);
    expect(() => resolvePolicy({ timeout: { soft: 300 } }, 1000, 'A.b')).toThrow(
      /^A\.b: timeout.soft serves the stale value, which needs grace/,
    );
    expect(() => resolvePolicy({ timeout: {} }, 1000, 'A.b')).toThrow(/^A\.b: timeout needs/);
    expect(() => resolvePolicy({ tags: ['a', 3 as unknown as string] }, 1000, 'A.b')).toThrow(
      /^A\.b: tags must be an array of non-empty strings, got \["a",3\]/,
    );
    expect(() => resolvePolicy({ cache: false, grace: '1m' }, 1000, 'A.b')).toThrow(
      /work on cached values/,
    );
  });

  it('names the method in every error', () => {
    expect(() => resolvePolicy({ xfetch: { beta: 0 } }, 1000, 'A.b')).toThrow(
      /^A\.b: XFetch beta must be a number > 0/,
    );
    expect(() => resolvePolicy({ lock: { ttl: 10, poll: 20 } }, 1000, 'A.b')).toThrow(
      /^A\.b: lock poll \(20 ms\)/,
    );
    expect(() => resolvePolicy({ jitter: 1 }, 1000, 'A.b')).toThrow(
      /^A\.b: jitter ratio must be in \[0, 1\)/,
    );
    expect(() => resolvePolicy({ ttl: '-5s' }, 1000, 'A.b')).toThrow(/^A\.b: ttl/);
    expect(() => resolvePolicy({ cache: false, lock: true }, 1000, 'A.b')).toThrow(
      /work on cached values/,
    );
  });
});
