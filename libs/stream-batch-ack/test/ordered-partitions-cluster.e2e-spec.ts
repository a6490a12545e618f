import { Cluster } from 'ioredis';
import { ClientRedisStreams, partitionOf } from '@nest-redis-resilience/stream-batch-ack';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import { waitFor } from './support/helpers';
import {
  EffectClient,
  emitRounds,
  firstOf,
  isBalanced,
  KeyedMessage,
  keyName,
  OrderedConsumers,
  orderProblems,
  withEffect,
} from './support/ordered-partitions';

// ordering: 'key' on a throwaway 3-master Redis Cluster: 3 consumers (in this process) share 6
// partitions (in 6 slots over the 3 masters), 3,000 messages over 50 keys, idempotency in Redis.
const STREAM = 'sba-opc-ticks';
const PARTITIONS = 6;
// the idempotency records and the effects share a slot (the hash tag), for the atomic effect
const EFFECTS = '{sba-opc}:effects';
const IDEM_PREFIX = '{sba-opc}:idem:';
const KEYS = Array.from({ length: 50 }, (_, i) => keyName(i));
const PER_KEY = 60;
const N = KEYS.length * PER_KEY;
const CONSUMERS = ['consumer-a', 'consumer-b', 'consumer-c'];

describe("ordering: 'key' on a Redis Cluster (throwaway 3 masters): 3 consumers, 6 partitions, 50 keys", () => {
  let redisCluster: ThrowawayCluster;
  let cluster: Cluster;
  let effects: EffectClient<Cluster>;
  let group: OrderedConsumers;

  beforeAll(async () => {
    redisCluster = await ThrowawayCluster.start();
    cluster = new Cluster(redisCluster.nodes);
    effects = withEffect(new Cluster(redisCluster.nodes));
    group = new OrderedConsumers(
      STREAM,
      PARTITIONS,
      { client: effects, hash: EFFECTS },
      (consumer) => ({
        connection: { cluster: redisCluster.nodes },
        group: 'candles',
        consumer,
        partitions: { [STREAM]: PARTITIONS },
        ordering: 'key',
        leaseMs: 10_000, // long: no partition moves here, not even on a busy machine
        read: { count: 100, blockMs: 50 },
        ack: { batchSize: 200, intervalMs: 20 },
        idempotency: { store: 'redis', keyPrefix: IDEM_PREFIX },
      }),
    );
    for (const consumer of CONSUMERS) await group.start(consumer);
  }, 90_000);

  afterAll(async () => {
    await group?.closeAll();
    await cluster?.quit();
    await effects?.quit();
    await redisCluster?.destroy();
  }, 30_000);

  it('3,000 messages: none missing, none duplicated, each key in order and never two at once, one owner per partition', async () => {
    const { log, watch } = group;
    await waitFor('each consumer owns 2 partitions', () => watch.balanced(), 60_000);
    const ownedBefore = watch.snapshot();
    for (const consumer of CONSUMERS) expect(ownedBefore.get(consumer)).toHaveLength(2);

    const client = new ClientRedisStreams({
      connection: { cluster: redisCluster.nodes },
      partitions: { [STREAM]: PARTITIONS },
      partitionKey: (_stream, data) => (data as KeyedMessage).key,
    });
    try {
      await client.connect();
      await emitRounds(client, STREAM, KEYS, 0, PER_KEY);
    } finally {
      await client.close();
    }

    await waitFor(
      'every effect applied, nothing pending or unread (ownership polled meanwhile)',
      async () => {
        watch.snapshot();
        if ((await cluster.hlen(EFFECTS)) < N) return false;
        const stats = await group.servers.get(CONSUMERS[0])!.streamStats(STREAM);
        return stats.pending === 0 && stats.lag === 0;
      },
      90_000,
    );

    const applied = await cluster.hgetall(EFFECTS);
    expect({
      effects: Object.keys(applied).length,
      notOnce: Object.entries(applied).filter(([, n]) => n !== '1'),
      runs: log.runs.length,
      order: orderProblems(log.runs, KEYS, PER_KEY),
      runProblems: firstOf(log.problems),
      headers: firstOf(group.headerProblems),
    }).toEqual({ effects: N, notOnce: [], runs: N, order: [], runProblems: [], headers: [] });

    // each partition ran on its owner only, and the owners did not change
    const ownerOf = new Map(
      [...ownedBefore].flatMap(([consumer, ps]) => ps.map((p) => [p, consumer] as const)),
    );
    const offOwner = log.runs.filter(
      (r) =>
        r.partition !== partitionOf(r.key, PARTITIONS) || r.consumer !== ownerOf.get(r.partition),
    );
    expect(offOwner).toEqual([]);
    expect(new Set(log.runs.map((r) => r.consumer))).toEqual(new Set(CONSUMERS));
    const ownedAfter = watch.snapshot();
    expect(ownedAfter).toEqual(ownedBefore);
    expect(isBalanced(ownedAfter, PARTITIONS)).toBe(true);
    expect(watch.problems).toEqual([]);
    expect(watch.events.filter((e) => e.type === 'lost')).toEqual([]);
  }, 180_000);
});
