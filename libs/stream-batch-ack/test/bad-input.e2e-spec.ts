import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Deserializer, MessagePattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import {
  ClientRedisStreams,
  Idempotent,
  RedisStreamsBatchContext,
  RedisStreamsClientOptions,
  RedisStreamsServerOptions,
  ServerRedisStreams,
  StreamBatchAckConfigError,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  randomPrefix,
  readAll,
  REDIS_URL,
  startMicroservice,
  waitFor,
} from './support/helpers';

jest.setTimeout(60_000);

const prefix = randomPrefix('bad-input');
const GROUP = 'g';
const MIXED = `${prefix}mixed`;
const KEYED = `${prefix}keyed`;
const DECODED = `${prefix}decoded`;

const batches: { payloads: unknown[]; ids: string[]; headers: unknown[] }[] = [];
@Controller()
class MixedController {
  @StreamEventPattern(MIXED, { batch: true })
  handle(@Payload() payloads: unknown[], @Ctx() ctx: RedisStreamsBatchContext) {
    batches.push({
      payloads,
      ids: ctx.entries.map((e) => e.id),
      headers: ctx.entries.map((e) => e.headers),
    });
  }
}

const keyed: string[] = [];
@Controller()
class KeyedController {
  @StreamEventPattern(KEYED)
  @Idempotent({ key: (order: { orderId: string }) => order.orderId.toLowerCase() })
  handle(@Payload() order: { orderId: string }) {
    keyed.push(order.orderId);
  }
}

const decoded: unknown[] = [];
@Controller()
class DecodedController {
  @StreamEventPattern(DECODED)
  handle(@Payload() data: unknown) {
    decoded.push(data);
  }
}

/** A deserializer that rejects some messages, as a schema check would. */
class StrictDeserializer implements Deserializer {
  deserialize(value: { pattern: string; data: { v?: number } }) {
    if (value.data.v !== 1) throw new Error(`unsupported message version ${String(value.data.v)}`);
    return value;
  }
}

const serverOptions = (
  over: Partial<RedisStreamsServerOptions> = {},
): RedisStreamsServerOptions => ({
  connection: REDIS_URL,
  group: GROUP,
  consumer: 'c1',
  read: { count: 50, blockMs: 50 },
  ack: { batchSize: 100, intervalMs: 20 },
  claim: { minIdleMs: 30_000, intervalMs: 30_000 },
  ...over,
});

describe('bad input in a stream: dead-lettered with the reason, the rest processed', () => {
  let redis: Redis;
  let app: INestMicroservice | undefined;

  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a batch with malformed entries (bad JSON, bad headers, half a request): those are dead-lettered, the others reach the batch handler', async () => {
    const add = async (...fields: string[]) => (await redis.xadd(MIXED, '*', ...fields)) as string;
    const good0 = await add('data', '{"n":0}');
    const badJson = await add('data', '{"broken":');
    const good1 = await add('data', '{"n":1}', 'headers', '{"traceparent":"t-1"}');
    const headersNotJson = await add('data', '{"n":2}', 'headers', 'not json');
    const headersArray = await add('data', '{"n":3}', 'headers', '["a"]');
    const headersNumber = await add('data', '{"n":4}', 'headers', '{"retries":1}');
    const halfRequest = await add('data', '{"n":5}', 'id', 'req-1');
    const foreign = await add('symbol', 'BTC', 'price', '1');
    const good2 = await add('data', '{"n":6}');

    ({ app } = await startMicroservice({ controllers: [MixedController] }, serverOptions()));
    await waitFor(
      '5 dead-lettered, the rest handled, nothing pending',
      async () =>
        (await redis.xlen(`${MIXED}:dlq`)) === 5 &&
        batches.reduce((n, b) => n + b.ids.length, 0) === 4 &&
        (await pendingCount(redis, MIXED, GROUP)) === 0,
    );

    // one read batch: the handler got the good entries, in stream order
    expect(batches).toHaveLength(1);
    expect(batches[0].ids).toEqual([good0, good1, foreign, good2]);
    expect(batches[0].payloads).toEqual([
      { n: 0 },
      { n: 1 },
      { symbol: 'BTC', price: '1' },
      { n: 6 },
    ]);
    expect(batches[0].headers).toEqual([{}, { traceparent: 't-1' }, {}, {}]);

    const dead = new Map(
      (await readAll(redis, `${MIXED}:dlq`)).map((e) => [e.fields.id, e.fields]),
    );
    const expectDead = (id: string, raw: Record<string, string>, error: RegExp) => {
      const entry = dead.get(id);
      expect(entry).toMatchObject({
        stream: MIXED,
        group: GROUP,
        reason: 'malformed',
        deliveries: '1',
        errorName: 'MalformedEntryError',
      });
      expect(entry!.error).toMatch(error);
      expect(entry!.error).toContain(`Entry ${id} of stream "${MIXED}" is malformed`);
      // the message names what is wrong, and blames "data" only when "data" is the problem
      if (!error.source.includes('data')) expect(entry!.error).not.toContain('"data"');
      expect(JSON.parse(entry!.fields)).toEqual(raw);
    };
    expectDead(badJson, { data: '{"broken":' }, /"data" .*not valid JSON/);
    expectDead(
      headersNotJson,
      { data: '{"n":2}', headers: 'not json' },
      /"headers" is not valid JSON/,
    );
    expectDead(
      headersArray,
      { data: '{"n":3}', headers: '["a"]' },
      /"headers" must be a JSON object/,
    );
    expectDead(
      headersNumber,
      { data: '{"n":4}', headers: '{"retries":1}' },
      /"headers" values must be strings/,
    );
    expectDead(halfRequest, { data: '{"n":5}', id: 'req-1' }, /needs both "id" and "replyTo"/);
  });

  it('an idempotency key function that throws dead-letters that entry as malformed', async () => {
    const add = async (order: unknown) =>
      (await redis.xadd(KEYED, '*', 'data', JSON.stringify(order))) as string;
    await add({ orderId: 'A-1' });
    const noKey = await add({ amount: 3 });
    await add({ orderId: 'A-2' });
    let server: ServerRedisStreams;
    ({ app, server } = await startMicroservice(
      { controllers: [KeyedController] },
      serverOptions({ idempotency: { store: 'redis', keyPrefix: `${prefix}idem:` } }),
    ));
    await waitFor(
      '2 handled, 1 dead-lettered, nothing pending',
      async () =>
        keyed.length === 2 &&
        (await redis.xlen(`${KEYED}:dlq`)) === 1 &&
        (await pendingCount(redis, KEYED, GROUP)) === 0,
    );
    expect(keyed).toEqual(['A-1', 'A-2']);
    const [dead] = await readAll(redis, `${KEYED}:dlq`);
    expect(dead.fields).toMatchObject({ id: noKey, reason: 'malformed', errorName: 'TypeError' });
    expect(server.metrics().deadLettered).toBe(1);
  });

  it('a deserializer that throws on one message dead-letters it as malformed; the others are handled', async () => {
    const add = async (data: unknown) =>
      (await redis.xadd(DECODED, '*', 'data', JSON.stringify(data))) as string;
    await add({ v: 1, n: 0 });
    const v2 = await add({ v: 2, n: 1 });
    await add({ v: 1, n: 2 });
    ({ app } = await startMicroservice(
      { controllers: [DecodedController] },
      serverOptions({ deserializer: new StrictDeserializer() }),
    ));
    await waitFor(
      '2 handled, 1 dead-lettered, nothing pending',
      async () =>
        decoded.length === 2 &&
        (await redis.xlen(`${DECODED}:dlq`)) === 1 &&
        (await pendingCount(redis, DECODED, GROUP)) === 0,
    );
    expect(decoded).toEqual([
      { v: 1, n: 0 },
      { v: 1, n: 2 },
    ]);
    const [dead] = await readAll(redis, `${DECODED}:dlq`);
    expect(dead.fields).toMatchObject({ id: v2, reason: 'malformed', deliveries: '1' });
    expect(dead.fields.error).toContain('unsupported message version 2');
  });
});

/** The error `fn` throws (fails the test when it throws nothing). */
function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected an error, nothing was thrown');
}

function expectConfigError(fn: () => unknown, option: string): void {
  const err = thrownBy(fn);
  expect(err).toBeInstanceOf(StreamBatchAckConfigError);
  expect((err as StreamBatchAckConfigError).option).toBe(option);
  expect((err as Error).message).toContain(`"${option}"`);
  expect((err as StreamBatchAckConfigError).code).toBe('INVALID_OPTIONS');
}

describe('invalid options fail at construction with StreamBatchAckConfigError naming the option (no Redis needed)', () => {
  const valid: RedisStreamsServerOptions = { connection: 'redis://127.0.0.1:1', group: 'g' };
  const server = (over: Record<string, unknown>) => () =>
    new ServerRedisStreams({ ...valid, ...over } as RedisStreamsServerOptions);

  it.each<[string, Record<string, unknown>, string]>([
    ['read.count 0', { read: { count: 0 } }, 'read.count'],
    ['read.blockMs 1.5', { read: { blockMs: 1.5 } }, 'read.blockMs'],
    ['ack.batchSize -1', { ack: { batchSize: -1 } }, 'ack.batchSize'],
    ['ack.intervalMs NaN', { ack: { intervalMs: NaN } }, 'ack.intervalMs'],
    ['ack.maxPending "10"', { ack: { maxPending: '10' } }, 'ack.maxPending'],
    ['claim.minIdleMs 0', { claim: { minIdleMs: 0 } }, 'claim.minIdleMs'],
    [
      'retry.maxMs = claim.minIdleMs',
      { claim: { minIdleMs: 1000 }, retry: { maxMs: 1000, jitter: 0 } },
      'retry.maxMs',
    ],
    [
      'retry.maxMs + jitter > claim.minIdleMs',
      { claim: { minIdleMs: 1000 }, retry: { maxMs: 900, jitter: 0.2 } },
      'retry.maxMs',
    ],
    ['retry.factor 0.5', { retry: { factor: 0.5 } }, 'retry.factor'],
    ['retry.jitter 1', { retry: { jitter: 1 } }, 'retry.jitter'],
    ['retry.initialMs -1', { retry: { initialMs: -1 } }, 'retry.initialMs'],
    [
      'deadLetter.maxDeliveries 0',
      { deadLetter: { maxDeliveries: 0 } },
      'deadLetter.maxDeliveries',
    ],
    ['deadLetter.stream a string', { deadLetter: { stream: 'dlq' } }, 'deadLetter.stream'],
    ["idempotency.store 'x'", { idempotency: { store: 'x' } }, 'idempotency.store'],
    ['idempotency.lockMs 0', { idempotency: { lockMs: 0 } }, 'idempotency.lockMs'],
    ['idempotency.ttlMs -5', { idempotency: { store: 'redis', ttlMs: -5 } }, 'idempotency.ttlMs'],
    ['concurrency 0', { concurrency: 0 }, 'concurrency'],
    ['shutdownTimeoutMs Infinity', { shutdownTimeoutMs: Infinity }, 'shutdownTimeoutMs'],
    ["connection 'http://x'", { connection: 'http://x' }, 'connection'],
    ["connection 'redis://h:99999' (no port)", { connection: 'redis://h:99999' }, 'connection'],
    ['connection missing', { connection: undefined }, 'connection'],
    ['connection with no cluster node', { connection: { cluster: [] } }, 'connection.cluster'],
    ["group ''", { group: '' }, 'group'],
    ['group missing', { group: undefined }, 'group'],
  ])('server: %s', (_name, over, option) => {
    expectConfigError(server(over), option);
  });

  it('a connection URL that cannot be parsed is refused on client and server, quoted without its password', () => {
    const connection = 'redis://default:s3cret@127.0.0.1:99999';
    for (const create of [
      () => new ServerRedisStreams({ ...valid, connection }),
      () => new ClientRedisStreams({ connection }),
    ]) {
      expectConfigError(create, 'connection');
      const message = (thrownBy(create) as Error).message;
      expect(message).toContain('"redis://***@127.0.0.1:99999" is not a valid URL');
      expect(message).not.toContain('s3cret');
    }
  });

  it('server: no options object at all', () => {
    expectConfigError(
      () => new ServerRedisStreams(undefined as unknown as RedisStreamsServerOptions),
      'options',
    );
  });

  it('server: valid options construct without connecting, with the defaults filled in', () => {
    const s = new ServerRedisStreams({ ...valid, claim: { minIdleMs: 1000 } });
    expect(s.options.retry.maxMs).toBe(500); // the default stays below claim.minIdleMs
    expect(s.options.read).toEqual({ count: 500, blockMs: 100 });
    expect(s.options.deadLetter.maxDeliveries).toBe(5);
    expect(s.options.deadLetter.stream('s')).toBe('s:dlq');
  });

  const client = (over: Record<string, unknown>) => () =>
    new ClientRedisStreams({
      connection: 'redis://127.0.0.1:1',
      ...over,
    } as RedisStreamsClientOptions);

  it.each<[string, Record<string, unknown>, string]>([
    ["connection 'http://x'", { connection: 'http://x' }, 'connection'],
    ["connection 'redis://h:99999' (no port)", { connection: 'redis://h:99999' }, 'connection'],
    ['connection missing', { connection: undefined }, 'connection'],
    ['maxLen -1', { maxLen: -1 }, 'maxLen'],
    ['trimEvery 0', { maxLen: 100, trimEvery: 0 }, 'trimEvery'],
    ['replyTimeoutMs 0', { replyTimeoutMs: 0 }, 'replyTimeoutMs'],
  ])('client: %s', (_name, over, option) => {
    expectConfigError(client(over), option);
  });

  it('a @MessagePattern with { batch: true } fails at listen, naming "batch"', async () => {
    @Controller()
    class WrongController {
      @MessagePattern(`${prefix}wrong`, { batch: true })
      handle() {
        return 1;
      }
    }
    const moduleRef = await Test.createTestingModule({ controllers: [WrongController] }).compile();
    const app = moduleRef.createNestMicroservice({
      strategy: new ServerRedisStreams(valid),
      logger: false,
    });
    const err = await app.listen().then(
      () => undefined,
      (e: unknown) => e,
    );
    await app.close();
    expect(err).toBeInstanceOf(StreamBatchAckConfigError);
    expect((err as StreamBatchAckConfigError).option).toBe('batch');
    expect((err as Error).message).toContain(`@EventPattern('${prefix}wrong', { batch: true })`);
  });
});
