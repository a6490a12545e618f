import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import { Cluster, Redis } from 'ioredis';
import {
  DeadLetters,
  RedisStreamsContext,
  RedisStreamsModule,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { partitionCountKey, partitionStreams } from '../src/partitions/partition-layout';
import { keySlot } from '../src/redis/keys';
import { deadLetterStreamDoubts, inspectStream } from '../src/dead-letter/dead-letters';

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import {
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  readAll,
  REDIS_URL,
  startMicroservice,
  waitFor,
} from './support/helpers';
import { addDeadLetter, addDeadLetters, dlq } from './support/dead-letters';

const prefix = randomPrefix('dead-letters');
jest.setTimeout(60_000);

let streams = 0;
const newStream = () => `${prefix}s${++streams}`;

describe('DeadLetters', () => {
  let redis: Redis;
  let dl: DeadLetters;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
    dl = new DeadLetters(redis);
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a stream without dead letters: empty, not an error', async () => {
    const stream = newStream();
    expect(await dl.list(stream)).toEqual([]);
    expect(await dl.count(stream)).toBe(0);
    expect(await dl.get(stream, '1-0')).toBeNull();
    expect(await dl.replay(stream, 'all')).toEqual({ replayed: [], missing: [], refused: [] });
    expect(await dl.replay(stream, ['1-0'])).toEqual({
      replayed: [],
      missing: ['1-0'],
      refused: [],
    });
    expect(await dl.drop(stream, 'all')).toBe(0);
    expect(await dl.drop(stream, ['1-0'])).toBe(0);
  });

  it('list, get and count read the entries the server writes', async () => {
    const stream = newStream();
    const id = await addDeadLetter(redis, stream, { data: '{"n":1}' }, { deliveries: '5' });
    expect(await dl.count(stream)).toBe(1);
    const expected = {
      deadLetterId: id,
      stream,
      group: 'workers',
      consumer: 'c1',
      deliveries: 5,
      reason: 'handler-failed',
      error: 'boom',
      errorName: 'Error',
      stack: 'Error: boom\n    at handler',
      failedAt: '2024-01-01T00:00:00.000Z',
      fields: { data: '{"n":1}' },
    };
    expect(await dl.list(stream)).toEqual([expect.objectContaining(expected)]);
    expect(await dl.get(stream, id)).toEqual(expect.objectContaining(expected));
    expect(await dl.get(stream, '1-0')).toBeNull();
  });

  it('list pages by dead-letter id, oldest first', async () => {
    const stream = newStream();
    const ids = await addDeadLetters(redis, stream, 25);
    const seen: string[] = [];
    let page = await dl.list(stream, { count: 10 });
    while (page.length > 0) {
      seen.push(...page.map((d) => d.deadLetterId));
      page = await dl.list(stream, { count: 10, after: page[page.length - 1].deadLetterId });
    }
    expect(seen).toEqual(ids);
    expect((await dl.list(stream, { from: ids[20] })).map((d) => d.deadLetterId)).toEqual(
      ids.slice(20),
    );
    expect(await dl.list(stream)).toHaveLength(25);
  });

  it('replay appends the original fields as a new entry that the group delivers, and deletes the dead letter', async () => {
    const stream = newStream();
    await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    const original = { data: '{"n":1}' };
    const foreign = { symbol: 'BTC', price: '1' };
    const [a, b, c] = [
      await addDeadLetter(redis, stream, original),
      await addDeadLetter(redis, stream, foreign),
      await addDeadLetter(redis, stream, { data: '{"n":3}' }),
    ];

    const result = await dl.replay(stream, [a, '1-0', b, a]);
    expect(result.missing).toEqual(['1-0']);
    expect(result.refused).toEqual([]);
    expect(result.replayed.map((r) => [r.deadLetterId, r.stream])).toEqual([
      [a, stream],
      [b, stream],
    ]);
    const entries = await readAll(redis, stream);
    expect(entries).toEqual([
      { id: result.replayed[0].newId, fields: original },
      { id: result.replayed[1].newId, fields: foreign },
    ]);
    expect((await dl.list(stream)).map((d) => d.deadLetterId)).toEqual([c]);

    const read = (await redis.xreadgroup('GROUP', 'workers', 'c1', 'STREAMS', stream, '>')) as [
      string,
      [string, string[]][],
    ][];
    expect(read[0][1].map(([id]) => id)).toEqual(result.replayed.map((r) => r.newId));
  });

  it("replay 'all' pages through a large dead-letter stream, in order", async () => {
    const stream = newStream();
    await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    const ids = await addDeadLetters(redis, stream, 250);
    const result = await dl.replay(stream, 'all');
    expect(result.replayed.map((r) => r.deadLetterId)).toEqual(ids);
    expect((await readAll(redis, stream)).map((e) => e.fields.data)).toEqual(
      ids.map((_, i) => `{"n":${i}}`),
    );
    expect(await dl.count(stream)).toBe(0);
  });

  it("replay 'all' stops at the dead letters present when it started", async () => {
    // Each replayed message fails again at once: a new dead letter arrives behind the others
    // (sent on the replay's own connection, so before it reads its next chunk).
    const stream = newStream();
    await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    await addDeadLetters(redis, stream, 3);
    const result = await dl.replay(stream, 'all', {
      chunkSize: 1,
      onReplayed: () => void addDeadLetter(redis, stream, { data: '{"again":true}' }),
    });
    expect(result.replayed).toHaveLength(3);
    expect(await dl.count(stream)).toBe(3);
  });

  it('a dead letter whose fields are not JSON is listed with a problem, refused by replay, and can be dropped', async () => {
    const stream = newStream();
    await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    const good = await addDeadLetter(redis, stream, { data: '{"n":1}' });
    const bad = await addDeadLetter(redis, stream, {}, { fields: '{broken' });

    const listed = await dl.list(stream);
    expect(listed[1]).toMatchObject({ deadLetterId: bad, fields: {} });
    expect(listed[1].problem).toContain('not valid JSON');
    expect(listed[0].problem).toBeUndefined();

    const byId = await dl.replay(stream, [bad]);
    expect(byId.replayed).toEqual([]);
    expect(byId.refused).toEqual([
      { deadLetterId: bad, reason: expect.stringContaining("can't be replayed") },
    ]);
    const all = await dl.replay(stream, 'all');
    expect(all.replayed.map((r) => r.deadLetterId)).toEqual([good]);
    expect(all.refused.map((r) => r.deadLetterId)).toEqual([bad]);
    expect(await redis.xlen(stream)).toBe(1);

    expect(await dl.drop(stream, [bad])).toBe(1);
    expect(await dl.count(stream)).toBe(0);
  });

  it('drop deletes the given dead letters, or all of them, and says how many', async () => {
    const stream = newStream();
    const ids = await addDeadLetters(redis, stream, 5);
    expect(await dl.drop(stream, [ids[0], ids[1], '1-0'])).toBe(2);
    expect((await dl.list(stream)).map((d) => d.deadLetterId)).toEqual(ids.slice(2));
    expect(await dl.drop(stream, 'all')).toBe(3);
    expect(await dl.count(stream)).toBe(0);
    expect(await redis.exists(stream)).toBe(0); // nothing replayed
  });

  it('two replays of one dead letter at once append it once', async () => {
    const stream = newStream();
    await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    const [id] = await addDeadLetters(redis, stream, 1);
    const [first, second] = await Promise.all([dl.replay(stream, [id]), dl.replay(stream, [id])]);
    expect(first.replayed.length + second.replayed.length).toBe(1);
    expect([...first.missing, ...second.missing]).toEqual([id]);
    expect(await redis.xlen(stream)).toBe(1);
  });

  it('a custom dead-letter stream name', async () => {
    const stream = newStream();
    await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    const custom = new DeadLetters(redis, { deadLetterStream: (s) => `${s}:dead` });
    await redis.xadd(`${stream}:dead`, '*', 'stream', stream, 'fields', '{"a":"1"}');
    await redis.xadd(`${stream}:dead`, '*', 'stream', `${stream}:other`, 'fields', '{"a":"2"}');
    const [d] = await custom.list(stream);
    expect(d.fields).toEqual({ a: '1' });
    const result = await custom.replay(stream, 'all');
    expect((await readAll(redis, stream)).map((e) => e.fields)).toEqual([{ a: '1' }]);
    // Not one of the streams whose dead letters go to `${stream}:dead`.
    expect(result.refused).toEqual([
      expect.objectContaining({
        reason: expect.stringContaining(`whose dead letters go to "${stream}:other:dead"`),
      }),
    ]);
    expect(await redis.exists(`${stream}:other`)).toBe(0);
  });

  it('replay writes only into a stream that exists, is a stream and is not a dead-letter stream', async () => {
    const custom = new DeadLetters(redis, { deadLetterStream: () => `${prefix}shared:dlq` });
    const missing = newStream();
    const notStream = newStream();
    await redis.set(notStream, 'x');
    const dlqLike = newStream();
    await addDeadLetter(redis, newStream(), { data: '{}' }, {}, dlqLike);
    const ok = newStream();
    await redis.xgroup('CREATE', ok, 'workers', '$', 'MKSTREAM');
    const ids = [];
    for (const target of [missing, notStream, dlqLike, `${prefix}shared:dlq`, ok])
      ids.push(await addDeadLetter(redis, target, { data: target }, {}, `${prefix}shared:dlq`));

    const result = await custom.replay('any', 'all');
    expect(result.replayed.map((r) => r.deadLetterId)).toEqual([ids[4]]);
    expect(result.refused.map((r) => [r.deadLetterId, r.reason])).toEqual([
      [ids[0], expect.stringContaining(`"${missing}" does not exist`)],
      [ids[1], expect.stringContaining(`"${notStream}" is a string, not a stream`)],
      [ids[2], expect.stringContaining(`"${dlqLike}" holds dead letters`)],
      [ids[3], expect.stringContaining('is this dead-letter stream itself')],
    ]);
    expect(await redis.exists(missing)).toBe(0);
    expect(await redis.get(notStream)).toBe('x');
    expect(await redis.xlen(dlqLike)).toBe(1);
    expect(await custom.count('any')).toBe(4);
  });

  it('a stream deleted during a replay is not created again: the replay stops and says what it did', async () => {
    const stream = newStream();
    await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    const ids = await addDeadLetters(redis, stream, 3);
    const error = await dl
      .replay(stream, 'all', {
        chunkSize: 1,
        // On the replay's connection: deleted before its next script.
        onReplayed: () => void redis.del(stream),
      })
      .catch((err: unknown) => err);
    expect(error).toMatchObject({
      code: 'INTERRUPTED',
      message: expect.stringContaining('stopped after replaying 1 dead letter(s)'),
      cause: expect.objectContaining({ message: expect.stringContaining('is not a stream') }),
      result: { replayed: [expect.objectContaining({ deadLetterId: ids[0] })], missing: [] },
    });
    expect(await redis.exists(stream)).toBe(0);
    expect((await dl.list(stream)).map((d) => d.deadLetterId)).toEqual(ids.slice(1));
  });

  it('bad input is a clear error', async () => {
    const stream = newStream();
    await expect(dl.get(stream, 'nope')).rejects.toThrow('"nope" is not a stream entry id');
    await expect(dl.replay(stream, ['1-0', 'x'])).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(dl.drop(stream, ['x'])).rejects.toThrow('not a stream entry id');
    await expect(dl.list(stream, { count: 0 })).rejects.toThrow('"count" must be a positive');
    await expect(dl.list(stream, { from: '1-0', after: '1-0' })).rejects.toThrow('not both');
  });

  it('on a Cluster, a stream and a dead-letter stream in different slots are refused before anything runs', async () => {
    expect(keySlot('orders')).not.toBe(keySlot('orders:dlq'));
    // Never connected: the check comes before any command.
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    try {
      await expect(new DeadLetters(cluster).replay('orders', 'all')).rejects.toMatchObject({
        code: 'CROSS_SLOT',
        message: expect.stringContaining('different hash slots'),
      });
    } finally {
      cluster.disconnect();
    }
  });
});

describe('DeadLetters on a Redis Cluster (throwaway 3-node cluster)', () => {
  let redisCluster: ThrowawayCluster;
  let cluster: Cluster;

  beforeAll(async () => {
    redisCluster = await ThrowawayCluster.start();
    cluster = new Cluster(redisCluster.nodes);
  }, 60_000);

  afterAll(async () => {
    await cluster?.quit();
    await redisCluster?.destroy();
  });

  it('lists, replays and drops the dead letters of a hash-tagged stream', async () => {
    const stream = '{sba-dlq}:orders';
    const dlq = `${stream}:dlq`;
    await cluster.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    const add = (n: number) =>
      cluster.xadd(dlq, '*', 'stream', stream, 'fields', JSON.stringify({ data: `{"n":${n}}` }));
    const ids = [(await add(1))!, (await add(2))!, (await add(3))!];
    const dl = new DeadLetters(cluster);
    expect((await dl.list(stream)).map((d) => d.deadLetterId)).toEqual(ids);

    const result = await dl.replay(stream, [ids[0], ids[1]]);
    expect(result.replayed.map((r) => r.deadLetterId)).toEqual([ids[0], ids[1]]);
    const rows = await cluster.xrange(stream, '-', '+');
    expect(rows.map(([id, fields]) => [id, fields])).toEqual([
      [result.replayed[0].newId, ['data', '{"n":1}']],
      [result.replayed[1].newId, ['data', '{"n":2}']],
    ]);
    expect(await dl.drop(stream, 'all')).toBe(1);
    expect(await dl.count(stream)).toBe(0);
  });
});

// ---------------------------------------------------------------- with the server

const NEST_STREAM = `${prefix}orders`;
const GROUP = 'workers';
let healed = false;
const runs: { n: number; id: string; deliveries: number; ok: boolean }[] = [];

@Controller()
class OrdersController {
  @StreamEventPattern(NEST_STREAM)
  handle(@Payload() order: { n: number; poison?: boolean }, @Ctx() ctx: RedisStreamsContext) {
    const ok = !order.poison || healed;
    runs.push({ n: order.n, id: ctx.id, deliveries: ctx.deliveries, ok });
    if (!ok) throw new Error(`cannot process order ${order.n}`);
  }
}

describe('DeadLetters with ServerRedisStreams', () => {
  let redis: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app, server } = await startMicroservice(
      { imports: [RedisStreamsModule.forRoot()], controllers: [OrdersController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { intervalMs: 20 },
        claim: { minIdleMs: 100, intervalMs: 50 },
        deadLetter: { maxDeliveries: 2 },
      },
    ));
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a poison message reaches the dead-letter stream; once the handler is fixed, replay runs it exactly once', async () => {
    const dl = DeadLetters.fromServer(server);
    const [, poisonId] = await produce(redis, NEST_STREAM, [{ n: 1 }, { n: 2, poison: true }]);
    await waitFor(
      'the poison message dead-lettered',
      async () => (await dl.count(NEST_STREAM)) === 1,
    );
    await waitFor(
      'nothing pending',
      async () => (await pendingCount(redis, NEST_STREAM, GROUP)) === 0,
    );

    const [dead] = await dl.list(NEST_STREAM);
    expect(dead).toMatchObject({
      stream: NEST_STREAM,
      id: poisonId,
      group: GROUP,
      deliveries: 2,
      reason: 'handler-failed',
      error: 'cannot process order 2',
      fields: { data: JSON.stringify({ n: 2, poison: true }) },
    });
    expect(new Date(dead.failedAt).getTime()).not.toBeNaN();
    // What the server writes is what sba-dlq takes for a dead-letter stream.
    expect(deadLetterStreamDoubts(await inspectStream(redis, `${NEST_STREAM}:dlq`))).toEqual([]);

    healed = true;
    const result = await dl.replay(NEST_STREAM, [dead.deadLetterId]);
    expect(result.replayed).toHaveLength(1);
    const { newId } = result.replayed[0];
    // A later message handled and nothing pending: the replayed one was read and acknowledged.
    await produce(redis, NEST_STREAM, [{ n: 3 }]);
    await waitFor('the replayed message handled', () => runs.some((r) => r.id === newId));
    await waitFor('message 3 handled', () => runs.some((r) => r.n === 3));
    await waitFor(
      'nothing pending',
      async () => (await pendingCount(redis, NEST_STREAM, GROUP)) === 0,
    );

    expect(runs.filter((r) => r.n === 2)).toEqual([
      { n: 2, id: poisonId, deliveries: 1, ok: false },
      { n: 2, id: poisonId, deliveries: 2, ok: false },
      { n: 2, id: newId, deliveries: 1, ok: true },
    ]);
    expect(runs.filter((r) => r.n !== 2).map((r) => r.n)).toEqual([1, 3]);
    expect(await dl.count(NEST_STREAM)).toBe(0);
  });
});

// ---------------------------------------------------------------- the CLI

describe('dlq CLI (node scripts/dlq.js)', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a partitioned stream: the logical name lists the partitions and their dead letters; a partition works as a stream', async () => {
    const logical = newStream();
    await redis.set(partitionCountKey(logical), '3');
    const partitions = partitionStreams(logical, 3);
    const ids = await addDeadLetters(redis, partitions[1], 2);

    const refused = await dlq(['list', logical]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`"${logical}" is a partitioned stream (3 partitions)`);
    for (const [i, partition] of partitions.entries())
      expect(refused.stderr).toMatch(
        new RegExp(`${escape(partition)}\\s+${escape(partition)}:dlq\\s+${i === 1 ? 2 : 0}\\n`),
      );

    const list = await dlq(['list', partitions[1], '--json']);
    expect(list).toMatchObject({ code: 0, stderr: '' });
    expect(
      (JSON.parse(list.stdout) as { deadLetterId: string }[]).map((d) => d.deadLetterId),
    ).toEqual(ids);
  });

  it('list --json, replay by id, replay --all', async () => {
    const stream = newStream();
    await redis.xgroup('CREATE', stream, 'workers', '$', 'MKSTREAM');
    const ids = await addDeadLetters(redis, stream, 3);

    const list = await dlq(['list', stream, '--json']);
    expect(list).toMatchObject({ code: 0, stderr: '' });
    const listed = JSON.parse(list.stdout) as { deadLetterId: string; fields: unknown }[];
    expect(listed.map((d) => d.deadLetterId)).toEqual(ids);
    expect(listed[0].fields).toEqual({ data: '{"n":0}' });

    const one = await dlq(['replay', stream, ids[0]]);
    expect(one.code).toBe(0);
    expect(one.stdout).toContain(`replayed ${ids[0]} -> ${stream}`);

    const all = await dlq(['replay', stream, '--all', '--json']);
    expect(all.code).toBe(0);
    expect(
      (JSON.parse(all.stdout) as { replayed: { deadLetterId: string }[] }).replayed.map(
        (r) => r.deadLetterId,
      ),
    ).toEqual(ids.slice(1));
    expect((await readAll(redis, stream)).map((e) => e.fields.data)).toEqual([
      '{"n":0}',
      '{"n":1}',
      '{"n":2}',
    ]);
    expect(await redis.xlen(`${stream}:dlq`)).toBe(0);
  });

  it('a table by default; a missing dead letter exits with 1', async () => {
    const stream = newStream();
    const [id] = await addDeadLetters(redis, stream, 1);
    const table = await dlq(['list', stream]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^DEAD-LETTER ID +ORIGINAL ID +REASON/);
    expect(table.stdout).toContain(id);
    expect(table.stdout).toContain(`1 shown, 1 in "${stream}:dlq"`);

    const missing = await dlq(['replay', stream, '1-0']);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toContain('missing  1-0');
  });

  it('bad usage exits with 2 and prints the usage', async () => {
    const bad = await dlq(['replay', 'orders']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('"replay" needs dead-letter ids or --all');
    expect(bad.stderr).toContain('Usage: sba-dlq');
    expect(bad.stdout).toBe('');
  });
});
