import { deadLetterStreamOf } from '../redis/redis-keys';
import { parseTicksEnv, TicksConfigError } from './ticks-env.schema';

const NODES = '127.0.0.1:7001,127.0.0.1:7002';

describe('parseTicksEnv on a Redis Cluster', () => {
  it('reads REDIS_CLUSTER_NODES and TICKS_PARTITIONS', () => {
    const c = parseTicksEnv({ REDIS_CLUSTER_NODES: NODES, TICKS_PARTITIONS: '6' });
    expect(c.redis.clusterNodes).toEqual([
      { host: '127.0.0.1', port: 7001 },
      { host: '127.0.0.1', port: 7002 },
    ]);
    expect(c.consumer.partitions).toBe(6);
    expect(c.collector.partitions).toBe(6);
  });

  it('accepts an unpartitioned stream with a hash tag', () => {
    const c = parseTicksEnv({ REDIS_CLUSTER_NODES: NODES, TICKS_STREAM: '{ticks}' });
    expect(deadLetterStreamOf(c.consumer, '{ticks}')).toBe('{ticks}:dlq');
  });

  it.each([
    [{ TICKS_STREAM: 'ticks' }, 'TICKS_STREAM must contain a hash tag'],
    [{ TICKS_PARTITIONS: '4', TICKS_STREAM: '{ticks}' }, 'TICKS_STREAM must not contain'],
    [{ TICKS_PARTITIONS: '4', TICKS_KEY_PREFIX: 'x:{a}:' }, 'TICKS_KEY_PREFIX must not contain'],
    [{ TICKS_PARTITIONS: '4', TICKS_GROUP: '{g}' }, 'TICKS_GROUP must not contain'],
    [
      { TICKS_STREAM: '{t}', TICKS_DEAD_LETTER_STREAM: 'dlq' },
      "must carry the stream's hash tag {t}",
    ],
    [
      { TICKS_PARTITIONS: '4', TICKS_DEAD_LETTER_STREAM: 'dlq' },
      'must be unset with TICKS_PARTITIONS',
    ],
    [{ REDIS_CLUSTER_NODES: 'nope' }, 'REDIS_CLUSTER_NODES must be a comma-separated list'],
  ])('refuses %j', (env, message) => {
    const run = () => parseTicksEnv({ REDIS_CLUSTER_NODES: NODES, ...env });
    expect(run).toThrow(TicksConfigError);
    expect(run).toThrow(message);
  });

  it('needs no Cluster for partitions, but refuses a tag in a partitioned stream', () => {
    expect(parseTicksEnv({ TICKS_PARTITIONS: '3' }).consumer.partitions).toBe(3);
    expect(() => parseTicksEnv({ TICKS_PARTITIONS: '3', TICKS_STREAM: '{t}' })).toThrow(
      'TICKS_STREAM must not contain',
    );
  });
});
