import { diffCommandStats, parseCommandStats, parseInfo, totalCalls } from './redis-stats';

const stat = (name: string, calls: number, usec: number) =>
  `cmdstat_${name}:calls=${calls},usec=${usec},usec_per_call=1.00,rejected_calls=0,failed_calls=0`;
const INFO = ['# Commandstats', stat('get', 10, 50), stat('evalsha', 4, 80), stat('info', 2, 30)]
  .concat(stat('client|pause', 1, 3), '')
  .join('\r\n');

describe('INFO parsing', () => {
  it('reads key/value pairs and skips section headers', () => {
    expect(parseInfo('# Server\r\nredis_version:7.2.4\r\nuptime:12\r\n')).toEqual({
      redis_version: '7.2.4',
      uptime: '12',
    });
  });

  it('reads calls and time per command, subcommands included', () => {
    const stats = parseCommandStats(INFO);
    expect(stats.get).toEqual({ calls: 10, usec: 50 });
    expect(stats['client|pause']).toEqual({ calls: 1, usec: 3 });
    expect(totalCalls(stats)).toBe(17);
  });
});

describe('diffCommandStats', () => {
  const before = parseCommandStats(INFO);
  const after = { ...before, get: { calls: 15, usec: 80 }, info: { calls: 3, usec: 45 } };
  const withSet = { ...after, set: { calls: 2, usec: 6 } };

  it('keeps the commands with new calls, without INFO by default', () => {
    expect(diffCommandStats(withSet, before)).toEqual({
      get: { calls: 5, usec: 30 },
      set: { calls: 2, usec: 6 },
    });
  });

  it('renames commands on request', () => {
    const diff = diffCommandStats(
      withSet,
      before,
      () => false,
      (c) => `x:${c}`,
    );
    expect(Object.keys(diff).sort()).toEqual(['x:get', 'x:info', 'x:set']);
  });
});
