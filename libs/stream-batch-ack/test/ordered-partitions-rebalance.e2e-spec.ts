import { Redis } from 'ioredis';
import { ClientRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { deleteKeys, randomPrefix, REDIS_URL, sleep, waitFor } from './support/helpers';
import {
  emitRounds,
  firstOf,
  KeyedMessage,
  keyName,
  OrderedConsumers,
  orderProblems,
  withEffect,
} from './support/ordered-partitions';

// ordering: 'key', graceful moves while messages flow: a 4th consumer joins (the partitions spread
// over 4), then one leaves with app.close() (its partitions go to the 3 others).
const prefix = randomPrefix('ordered-rebalance');
const STREAM = `${prefix}ticks`;
const PARTITIONS = 6;
const EFFECTS = `${prefix}effects`;
const KEYS = Array.from({ length: 48 }, (_, i) => keyName(i));

/** Emits rounds (one message per key) until stopped; `rounds` counts the rounds emitted. */
class Producer {
  rounds = 0;
  private stopped = false;
  private readonly done: Promise<void>;
  private readonly client = new ClientRedisStreams({
    connection: REDIS_URL,
    partitions: { [STREAM]: PARTITIONS },
    partitionKey: (_stream, data) => (data as KeyedMessage).key,
  });

  constructor() {
    this.done = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      await emitRounds(this.client, STREAM, KEYS, this.rounds, this.rounds + 1);
      this.rounds++;
      await sleep(25);
    }
  }

  /** Waits until `n` more rounds went out. */
  async more(n: number): Promise<void> {
    const target = this.rounds + n;
    await waitFor(`${n} more rounds emitted`, () => this.rounds >= target, 30_000);
  }

  async stop(): Promise<number> {
    this.stopped = true;
    await this.done.finally(() => this.client.close());
    return this.rounds;
  }
}

describe("ordering: 'key': a consumer joins, then one leaves with app.close(), while messages flow", () => {
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
      leaseMs: 6000, // moves at beats (every 2 s); a lease lapses only after a stall of 2.5 s
      read: { count: 50, blockMs: 50 },
      ack: { batchSize: 100, intervalMs: 20 },
      idempotency: { store: 'redis', keyPrefix: `${prefix}idem:` },
    }),
    1, // a run spans some time, so that moves happen while runs are in flight
  );
  const { log, watch, servers } = group;
  let producer: Producer | undefined;

  beforeAll(async () => {
    for (const consumer of ['consumer-a', 'consumer-b', 'consumer-c']) await group.start(consumer);
    await waitFor('2 partitions per consumer', () => watch.balanced(), 60_000);
  }, 90_000);

  afterAll(async () => {
    await producer?.stop();
    await group.closeAll();
    await deleteKeys(redis, prefix);
    await redis.quit();
    await effects.quit();
  }, 30_000);

  it('the partitions move evenly, never to two owners at once; every message runs once, each key in order', async () => {
    producer = new Producer();
    await producer.more(10);

    // a 4th consumer joins: 6 partitions over 4 consumers (2, 2, 1, 1)
    await group.start('consumer-d');
    await waitFor(
      'the partitions spread over 4 consumers',
      () => watch.balanced() && watch.snapshot().get('consumer-d')!.length >= 1,
      30_000,
    );
    const afterJoin = watch.snapshot();
    expect([...afterJoin.values()].map((o) => o.length).sort()).toEqual([1, 1, 2, 2]);
    await producer.more(10);

    // consumer-b leaves: by the time close() resolves it owns nothing and released what it held
    const ofB = afterJoin.get('consumer-b')!;
    const closeFrom = watch.events.length;
    await group.close('consumer-b');
    expect(servers.get('consumer-b')!.ownedPartitions(STREAM)).toEqual([]);
    const releasedAtClose = watch.events
      .slice(closeFrom)
      .filter((e) => e.type === 'released' && e.consumer === 'consumer-b');
    expect(releasedAtClose.map((e) => [e.partition, e.reason]).sort()).toEqual(
      ofB.map((p) => [p, 'shutdown']),
    );
    await waitFor(
      'the partitions spread over the 3 others',
      () => watch.balanced() && [...watch.snapshot().values()].every((o) => o.length === 2),
      30_000,
    );
    await producer.more(10);

    const rounds = await producer.stop();
    await waitFor(
      'every effect applied, nothing pending or unread',
      async () => {
        watch.snapshot();
        if ((await redis.hlen(EFFECTS)) < rounds * KEYS.length) return false;
        const stats = await servers.get('consumer-a')!.streamStats(STREAM);
        return stats.pending === 0 && stats.lag === 0;
      },
      60_000,
    );

    // nothing lost, nothing run twice (graceful moves redeliver nothing that ran), each key in
    // order; never two runs of a key at once, nor a partition on two consumers at once, nor a run
    // on a consumer that did not own its partition; the moves were hand-overs, no lease was lost
    const n = rounds * KEYS.length;
    const applied = await redis.hgetall(EFFECTS);
    expect({
      effects: Object.keys(applied).length,
      notOnce: Object.entries(applied).filter(([, times]) => times !== '1'),
      runs: log.runs.length,
      order: orderProblems(log.runs, KEYS, rounds),
      runProblems: firstOf(log.problems),
      ownership: firstOf(watch.problems),
      lost: watch.events.filter((e) => e.type === 'lost'),
    }).toEqual({
      effects: n,
      notOnce: [],
      runs: n,
      order: [],
      runProblems: [],
      ownership: [],
      lost: [],
    });
    const rebalanced = watch.events.filter(
      (e) => e.type === 'released' && !releasedAtClose.includes(e),
    );
    expect(rebalanced.length).toBeGreaterThan(0);
    expect(new Set(rebalanced.map((e) => e.reason))).toEqual(new Set(['rebalance']));
    // the metrics count the same assignments and releases
    for (const [consumer, server] of servers) {
      const mine = watch.events.filter((e) => e.consumer === consumer);
      expect([consumer, server.metrics()]).toMatchObject([
        consumer,
        {
          partitionsAssigned: mine.filter((e) => e.type === 'assigned').length,
          partitionsReleased: mine.filter((e) => e.type === 'released').length,
          partitionLeasesLost: 0,
        },
      ]);
    }
  }, 180_000);
});
