import { parseConsumers, reclaimBacklog } from './reclaim-backlog';

describe('reclaimBacklog', () => {
  // XINFO CONSUMERS of Redis 7.0 (7.2 adds `inactive`)
  const reply = [
    ['name', 'dead', 'pending', 2136, 'idle', 120_000],
    ['name', 'live', 'pending', 800, 'idle', 40],
    ['name', 'gone', 'pending', 0, 'idle', 900_000],
    ['name', 'slow', 'pending', 5, 'idle', 30_000],
  ];

  it('reads XINFO CONSUMERS', () => {
    expect(parseConsumers(reply)[0]).toEqual({ name: 'dead', pending: 2136, idleMs: 120_000 });
  });

  it('counts the pending entries of consumers idle longer than the claim threshold', () => {
    expect(reclaimBacklog(parseConsumers(reply), 30_000)).toEqual({
      backlog: 2136,
      consumers: { dead: 2136 },
    });
    expect(reclaimBacklog(parseConsumers(reply), 1000)).toEqual({
      backlog: 2141,
      consumers: { dead: 2136, slow: 5 },
    });
    expect(reclaimBacklog([], 1000)).toEqual({ backlog: 0, consumers: {} });
  });
});
