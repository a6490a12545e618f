import { Redis } from 'ioredis';
import {
  ClientRedisStreams,
  partitionOf,
  partitionStreams,
} from '@nest-redis-resilience/stream-batch-ack';
import { deleteKeys, randomPrefix, REDIS_URL, waitFor } from './support/helpers';
import {
  emitRounds,
  firstOf,
  isBalanced,
  KeyedMessage,
  keyName,
  OrderedConsumers,
  orderProblems,
  withEffect,
} from './support/ordered-partitions';

// ordering: 'key' on a single Redis: 3 consumers (in this process) share 6 partitions, one owner
// each; 6,000 messages over 100 keys, idempotency with the Redis store.
const prefix = randomPrefix('ordered-partitions');
const STREAM = `${prefix}ticks`;
const PARTITIONS = 6;
const EFFECTS = `${prefix}effects`;
const KEYS = Array.from({ length: 100 }, (_, i) => keyName(i));
const PER_KEY = 60;
const N = KEYS.length * PER_KEY;
const CONSUMERS = ['consumer-a', 'consumer-b', 'consumer-c'];

describe("ordering: 'key' on a single Redis: 3 consumers, 6 partitions, 100 keys", () => {
  const redis = new Redis(REDIS_URL);
  const effects = withEffect(new Redis(REDIS_URL));
  const group = new OrderedConsumers(
    STREAM,
    PARTITIONS,
    { client: effects, hash: EFFECTS },
    (consumer) => ({
      connection: REDIS_URL,
      group: 'candles',
      consumer,
      partitions: { [STREAM]: PARTITIONS },
      ordering: 'key',
      // long leases: this spec moves no partition, and a machine too busy to renew a short lease
      // in time would move one
      leaseMs: 10_000,
      read: { count: 100, blockMs: 50 },
      ack: { batchSize: 200, intervalMs: 20 },
      idempotency: { store: 'redis', keyPrefix: `${prefix}idem:` },
    }),
  );
  const { log, watch } = group;

  beforeAll(async () => {
    for (const consumer of CONSUMERS) await group.start(consumer);
  }, 60_000);

  afterAll(async () => {
    await group.closeAll();
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effects.quit();
  }, 30_000);

  it('the partitions are spread evenly, one owner each: 2 per consumer', async () => {
    await waitFor('each consumer owns 2 partitions', () => watch.balanced(), 60_000);
    const owned = watch.snapshot();
    for (const consumer of CONSUMERS) expect(owned.get(consumer)).toHaveLength(2);
    expect(watch.problems).toEqual([]);
  }, 70_000);

  it('6,000 messages: none missing, none duplicated, each key in order and never two at once, each partition on its owner only', async () => {
    const ownedBefore = watch.snapshot();
    const client = new ClientRedisStreams({
      connection: REDIS_URL,
      partitions: { [STREAM]: PARTITIONS },
      partitionKey: (_stream, data) => (data as KeyedMessage).key,
    });
    try {
      await emitRounds(client, STREAM, KEYS, 0, PER_KEY);
    } finally {
      await client.close();
    }

    await waitFor(
      'every effect applied, nothing pending or unread (ownership polled meanwhile)',
      async () => {
        watch.snapshot();
        if ((await redis.hlen(EFFECTS)) < N) return false;
        const stats = await group.servers.get(CONSUMERS[0])!.streamStats(STREAM);
        return stats.pending === 0 && stats.lag === 0;
      },
      90_000,
    );

    // none missing, none duplicated: each effect exactly once, each message run exactly once;
    // each key in emit order (across consumers), never two runs of a key at once
    const applied = await redis.hgetall(EFFECTS);
    expect({
      effects: Object.keys(applied).length,
      notOnce: Object.entries(applied).filter(([, n]) => n !== '1'),
      runs: log.runs.length,
      order: orderProblems(log.runs, KEYS, PER_KEY),
      runProblems: firstOf(log.problems),
      headers: firstOf(group.headerProblems),
    }).toEqual({ effects: N, notOnce: [], runs: N, order: [], runProblems: [], headers: [] });

    // each partition ran on the consumer that owned it, and only there; ownership did not change
    const ranOn = new Map<number, Set<string>>();
    for (const run of log.runs) {
      expect(run.partition).toBe(partitionOf(run.key, PARTITIONS));
      ranOn.set(run.partition!, (ranOn.get(run.partition!) ?? new Set()).add(run.consumer));
    }
    const ownerOf = new Map(
      [...ownedBefore].flatMap(([consumer, ps]) => ps.map((p) => [p, consumer] as const)),
    );
    for (let p = 0; p < PARTITIONS; p++)
      expect([p, [...(ranOn.get(p) ?? [])]]).toEqual([p, [ownerOf.get(p)]]);
    const ownedAfter = watch.snapshot();
    expect(ownedAfter).toEqual(ownedBefore);
    expect(isBalanced(ownedAfter, PARTITIONS)).toBe(true);
    expect(watch.problems).toEqual([]);
    expect(watch.events.filter((e) => e.type === 'lost')).toEqual([]);
    for (const server of group.servers.values())
      expect(server.metrics()).toMatchObject({ partitionLeasesLost: 0 });
    for (const stream of partitionStreams(STREAM, PARTITIONS))
      expect(await redis.exists(`${stream}:dlq`)).toBe(0);
  }, 120_000);
});
