import { INestMicroservice } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  ClientRedisStreams,
  partitionOf,
  partitionStream,
  partitionStreams,
  RedisStreamsContext,
  ServerRedisStreams,
} from '@nest-redis-resilience/stream-batch-ack';
import { deleteKeys, randomPrefix, readAll, REDIS_URL, waitFor } from './support/helpers';
import {
  emitRounds,
  HandlerRunLog,
  KeyedMessage,
  keyName,
  orderedController,
  orderProblems,
  OwnershipWatch,
  startConsumer,
} from './support/ordered-partitions';

// ordering: 'key': a message whose handler always fails holds back the later messages of its key,
// and only of its key, until it is dead-lettered (deadLetter.maxDeliveries = 3).
const prefix = randomPrefix('ordered-poison');
const STREAM = `${prefix}orders`;
const PARTITIONS = 4;
const GROUP = 'g';
const KEYS = Array.from({ length: 20 }, (_, i) => keyName(i));
const PER_KEY = 30;
const PHASE_2 = 15; // seq 15.. are emitted after the poison message failed once
const POISON = { key: keyName(7), seq: 10 };
const POISON_PARTITION = partitionOf(POISON.key, PARTITIONS);
const POISON_STREAM = partitionStream(STREAM, POISON_PARTITION, PARTITIONS);
const MAX_DELIVERIES = 3;
const CONSUMERS = ['consumer-a', 'consumer-b'];

const isPoison = (m: KeyedMessage) => m.key === POISON.key && m.seq === POISON.seq;
const log = new HandlerRunLog();
const watch = new OwnershipWatch(STREAM, PARTITIONS);
const servers = new Map<string, ServerRedisStreams>();
const poisonRuns: { deliveries: number; index: number }[] = [];
let othersDoneWhileHeld: boolean | undefined;
let dlqLengthAtFirstLaterRun: number | undefined;
let redis: Redis;

const othersDone = () =>
  log.runs.filter((r) => r.key !== POISON.key).length === (KEYS.length - 1) * PER_KEY;

const Orders = orderedController(STREAM, async (msg: KeyedMessage, ctx: RedisStreamsContext) => {
  const end = log.start(
    { ...msg, consumer: ctx.consumer, partition: ctx.partition, deliveries: ctx.deliveries },
    servers.get(ctx.consumer)!.ownedPartitions(STREAM),
  );
  try {
    if (isPoison(msg)) {
      poisonRuns.push({ deliveries: ctx.deliveries, index: log.runs.length - 1 });
      // On its second delivery the poison message keeps running until every message of the other
      // keys ran, its partition's included: if they were held back too, this wait times out.
      if (poisonRuns.length === 2)
        othersDoneWhileHeld = await waitFor('the other keys', othersDone, 30_000).then(
          () => true,
          () => false,
        );
      throw new Error(`poison ${msg.key}/${msg.seq}`);
    }
    if (
      msg.key === POISON.key &&
      msg.seq === POISON.seq + 1 &&
      log.runsOf(msg.key, msg.seq).length === 1
    )
      dlqLengthAtFirstLaterRun = await redis.xlen(`${POISON_STREAM}:dlq`);
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    end();
  }
});

describe("ordering: 'key': a poison message holds back only its key, then is dead-lettered", () => {
  const apps: INestMicroservice[] = [];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    for (const consumer of CONSUMERS) {
      const { app } = await startConsumer(
        Orders,
        {
          connection: REDIS_URL,
          group: GROUP,
          consumer,
          partitions: { [STREAM]: PARTITIONS },
          ordering: 'key',
          leaseMs: 10_000, // long: no partition moves here, not even on a busy machine
          read: { count: 50, blockMs: 50 },
          ack: { batchSize: 100, intervalMs: 20 },
          retry: { initialMs: 100, maxMs: 200, factor: 2, jitter: 0 },
          deadLetter: { maxDeliveries: MAX_DELIVERIES },
        },
        (s) => {
          servers.set(consumer, s);
          watch.attach(s);
        },
      );
      apps.push(app);
    }
    await waitFor('the partitions spread over both consumers', () => watch.balanced(), 60_000);
  }, 90_000);

  afterAll(async () => {
    for (const app of apps) await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  }, 30_000);

  it('the other keys (of its partition too) finish while it fails; it reaches <partition>:dlq after 3 deliveries; then its key goes on in order', async () => {
    // the poison's partition has other keys, whose later messages must not wait for it
    const neighbours = KEYS.filter(
      (k) => k !== POISON.key && partitionOf(k, PARTITIONS) === POISON_PARTITION,
    );
    expect(neighbours.length).toBeGreaterThanOrEqual(2);

    const client = new ClientRedisStreams({
      connection: REDIS_URL,
      partitions: { [STREAM]: PARTITIONS },
      partitionKey: (_stream, data) => (data as KeyedMessage).key,
    });
    try {
      await emitRounds(client, STREAM, KEYS, 0, PHASE_2);
      await waitFor('the poison message ran once', () => poisonRuns.length >= 1, 30_000);
      await emitRounds(client, STREAM, KEYS, PHASE_2, PER_KEY);
    } finally {
      await client.close();
    }

    await waitFor(
      'every message ran, the poison dead-lettered, nothing pending',
      async () => {
        watch.snapshot();
        if (log.runs.length < KEYS.length * PER_KEY + MAX_DELIVERIES - 1) return false;
        const stats = await servers.get(CONSUMERS[0])!.streamStats(STREAM);
        return (
          stats.pending === 0 && stats.lag === 0 && (await redis.xlen(`${POISON_STREAM}:dlq`)) === 1
        );
      },
      60_000,
    );

    // the poison ran maxDeliveries times, and meanwhile every other key ran to its end
    expect(poisonRuns).toHaveLength(MAX_DELIVERIES);
    expect(othersDoneWhileHeld).toBe(true);
    const lastPoisonRun = poisonRuns[MAX_DELIVERIES - 1].index;
    for (const key of neighbours)
      for (let seq = PHASE_2; seq < PER_KEY; seq++)
        expect(log.runs.findIndex((r) => r.key === key && r.seq === seq)).toBeLessThan(
          lastPoisonRun,
        );
    // its key's later messages ran only after it was dead-lettered, and then in order
    const firstLater = log.runs.findIndex((r) => r.key === POISON.key && r.seq > POISON.seq);
    expect(firstLater).toBeGreaterThan(lastPoisonRun);
    expect(dlqLengthAtFirstLaterRun).toBe(1);
    expect(
      orderProblems(log.runs, KEYS, PER_KEY, (_earlier, key, seq) => isPoison({ key, seq })),
    ).toEqual([]);
    expect(log.runs).toHaveLength(KEYS.length * PER_KEY + MAX_DELIVERIES - 1);
    expect(log.problems).toEqual([]);
    expect(watch.problems).toEqual([]);

    // the dead letter: in the dead-letter stream of the poison's partition, and only there
    const [dead] = await readAll(redis, `${POISON_STREAM}:dlq`);
    expect(dead.fields).toMatchObject({
      stream: POISON_STREAM,
      group: GROUP,
      deliveries: String(MAX_DELIVERIES),
      error: `poison ${POISON.key}/${POISON.seq}`,
    });
    expect(JSON.parse(JSON.parse(dead.fields.fields).data)).toEqual(POISON);
    for (const stream of partitionStreams(STREAM, PARTITIONS))
      if (stream !== POISON_STREAM) expect(await redis.exists(`${stream}:dlq`)).toBe(0);
  }, 120_000);
});
