import { ConfigError, parseShortenerEnv } from './env.schema';

describe('parseShortenerEnv: REDIS_CLUSTER_NODES and CACHE_L1_ENTRIES', () => {
  it('reads the seed nodes of a Redis Cluster (IPv6 in brackets)', () => {
    const { cache } = parseShortenerEnv({
      REDIS_CLUSTER_NODES: '127.0.0.1:7001, redis-b:7002,[::1]:7003',
    });
    expect(cache.clusterNodes).toEqual([
      { host: '127.0.0.1', port: 7001 },
      { host: 'redis-b', port: 7002 },
      { host: '::1', port: 7003 },
    ]);
  });

  it('has no cluster and no in-process tier by default', () => {
    const { cache } = parseShortenerEnv({});
    expect(cache.clusterNodes).toBeUndefined();
    expect(cache.l1Entries).toBe(0);
    expect(parseShortenerEnv({ CACHE_L1_ENTRIES: '5000' }).cache.l1Entries).toBe(5000);
  });

  it.each(['127.0.0.1', '127.0.0.1:0', '127.0.0.1:70000', 'a:1,,b:2', 'redis://a:1'])(
    'refuses %j with the variable, its value and an example',
    (value) => {
      expect(() => parseShortenerEnv({ REDIS_CLUSTER_NODES: value })).toThrow(ConfigError);
      expect(() => parseShortenerEnv({ REDIS_CLUSTER_NODES: value })).toThrow(
        `REDIS_CLUSTER_NODES=${JSON.stringify(value)} is not valid: expected a comma-separated list of host:port seed nodes of a Redis Cluster, such as 127.0.0.1:7001,127.0.0.1:7002`,
      );
    },
  );
});
