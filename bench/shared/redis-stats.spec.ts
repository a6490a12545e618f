import { diffCommandStats, parseCommandStats, parseInfo, totalCalls } from './redis-stats';

const INFO = [
  '# Commandstats',
  'cmdstat_get:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0',
  'cmdstat_evalsha:calls=4,usec=80,usec_per_call=20.00,rejected_calls=0,failed_calls=0',
  'cmdstat_info:calls=2,usec=30,usec_per_call=15.00,rejected_calls=0,failed_calls=0',
  'cmdstat_client|pause:calls=1,usec=3,usec_per_call=3.00,rejected_calls=0,failed_calls=0',
  '',
].join('\r\n');

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
  const after = {
    ...before,
    get: { calls: 15, usec: 80 },
    info: { calls: 3, usec: 45 },
    set: { calls: 2, usec: 6 },
  };

  it('keeps the commands with new calls, without INFO by default', () => {
    expect(diffCommandStats(after, before)).toEqual({
      get: { calls: 5, usec: 30 },
      set: { calls: 2, usec: 6 },
    });
  });

  it('renames commands on request', () => {
    const diff = diffCommandStats(
      after,
      before,
      () => false,
      (c) => `x:${c}`,
    );
    expect(Object.keys(diff).sort()).toEqual(['x:get', 'x:info', 'x:set']);
  });
});
