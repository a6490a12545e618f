import { Controller, INestMicroservice, Logger } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  RequestTimeoutError,
  ServerRedisStreams,
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

jest.setTimeout(90_000);

const prefix = randomPrefix('reply-namespace');
const GROUP = 'rpc';
const RPC = `${prefix}rpc`;
const ORDERS = `${prefix}orders`;
const STRING_KEY = `${prefix}string`;
const UNREAD = 20_000;
/** The reply namespace of the second server and its clients. */
const REPLY_PREFIX = `${prefix}reply:`;

const handled: unknown[] = [];

/** A stream of `n` entries that its group "billing" has not read yet. */
async function fillStream(redis: Redis, stream: string, n: number): Promise<void> {
  await redis.call('XGROUP', 'CREATE', stream, 'billing', '0', 'MKSTREAM');
  for (let i = 0; i < n; i += 1000) {
    const pipeline = redis.pipeline();
    for (let j = i; j < Math.min(n, i + 1000); j++) pipeline.xadd(stream, '*', 'order', String(j));
    await pipeline.exec();
  }
}

const request = (redis: Redis, replyTo: string) =>
  redis.xadd(RPC, '*', 'data', '{"q":1}', 'id', randomUUID(), 'replyTo', replyTo);

@Controller()
class RpcController {
  @MessagePattern(RPC)
  answer(@Payload() data: unknown) {
    handled.push(data);
    return { ok: true };
  }
}

describe('a request cannot make the server write outside the reply namespace', () => {
  let redis: Redis;
  let app: INestMicroservice | undefined;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    await fillStream(redis, ORDERS, UNREAD);
    await redis.set(STRING_KEY, 'precious');
    ({ app } = await startMicroservice(
      { controllers: [RpcController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
      },
    ));
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it("replyTo naming an unrelated stream or a string key: neither is trimmed nor given a TTL; the request is dead-lettered with the reason, the handler doesn't run", async () => {
    const toOrders = (await redis.xadd(RPC, '*', 'data', '{}', 'id', 'x', 'replyTo', ORDERS))!;
    const toString = (await redis.xadd(RPC, '*', 'data', '{}', 'id', 'y', 'replyTo', STRING_KEY))!;
    await waitFor(
      'both requests settled (handled or dead-lettered) and acknowledged',
      async () =>
        (await redis.xlen(`${RPC}:dlq`)) + handled.length === 2 &&
        (await pendingCount(redis, RPC, GROUP)) === 0,
    );

    expect(await redis.xlen(ORDERS)).toBe(UNREAD);
    expect(await redis.pttl(ORDERS)).toBe(-1);
    expect(await redis.get(STRING_KEY)).toBe('precious');
    expect(await redis.pttl(STRING_KEY)).toBe(-1);
    expect(handled).toEqual([]);

    const dead = new Map((await readAll(redis, `${RPC}:dlq`)).map((e) => [e.fields.id, e.fields]));
    for (const [id, replyTo] of [
      [toOrders, ORDERS],
      [toString, STRING_KEY],
    ]) {
      expect(dead.get(id)).toMatchObject({ stream: RPC, reason: 'malformed' });
      expect(dead.get(id)!.error).toContain(`"replyTo" ("${replyTo}") is not a reply stream`);
      expect(dead.get(id)!.error).toContain('replyPrefix');
    }
  });
});

describe('a client and a server with different replyPrefix', () => {
  let redis: Redis;
  let app: INestMicroservice | undefined;
  let client: ClientRedisStreams | undefined;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app } = await startMicroservice(
      { controllers: [RpcController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        replyPrefix: `${prefix}server-replies:`,
      },
    ));
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('the request is refused: dead-lettered naming both namespaces, not handled, no reply; send() times out', async () => {
    client = new ClientRedisStreams({
      connection: REDIS_URL,
      replyPrefix: `${prefix}client-replies:`,
      replyTimeoutMs: 1000,
    });
    await client.connect();
    const before = handled.length;
    const dlqBefore = await redis.xlen(`${RPC}:dlq`);
    await expect(firstValueFrom(client.send(RPC, { q: 2 }))).rejects.toBeInstanceOf(
      RequestTimeoutError,
    );
    await waitFor(
      'the request dead-lettered and acknowledged',
      async () =>
        (await redis.xlen(`${RPC}:dlq`)) === dlqBefore + 1 &&
        (await pendingCount(redis, RPC, GROUP)) === 0,
    );
    expect(handled.length).toBe(before);
    expect(await redis.xlen(client.replyStream)).toBe(0);
    const dead = (await readAll(redis, `${RPC}:dlq`)).at(-1)!.fields;
    expect(dead.reason).toBe('malformed');
    expect(JSON.parse(dead.fields)).toMatchObject({ replyTo: client.replyStream });
    expect(dead.error).toContain(`"replyTo" ("${client.replyStream}") is not a reply stream`);
    expect(dead.error).toContain(`its replyPrefix "${prefix}server-replies:"`);
  });
});

describe('request-reply with a custom replyPrefix on both sides', () => {
  let redis: Redis;
  let app: INestMicroservice | undefined;
  let server: ServerRedisStreams;
  let client: ClientRedisStreams;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app, server } = await startMicroservice(
      { controllers: [RpcController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        replyPrefix: REPLY_PREFIX,
      },
    ));
    client = new ClientRedisStreams({ connection: REDIS_URL, replyPrefix: REPLY_PREFIX });
    await client.connect();
  });

  afterAll(async () => {
    await client.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('send() is answered through a reply stream in the namespace', async () => {
    expect(client.replyStream).toMatch(
      new RegExp(
        `^${REPLY_PREFIX}\\{[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\\}$`,
      ),
    );
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, i) => firstValueFrom(client.send(RPC, { i }))),
    );
    expect(answers).toEqual(Array.from({ length: 5 }, () => ({ ok: true })));
    expect(await redis.type(client.replyStream)).toBe('stream');
  });

  it('names in the namespace that no client made (a string, a stream of others): left as they are, the refusal logged once each', async () => {
    const warn = jest.spyOn((server as unknown as { logger: Logger }).logger, 'warn');
    const squatString = `${REPLY_PREFIX}{${randomUUID()}}`;
    const squatStream = `${REPLY_PREFIX}{${randomUUID()}}`;
    await redis.set(squatString, 'precious');
    await fillStream(redis, squatStream, 12_000);
    const before = handled.length;
    for (let i = 0; i < 2; i++) {
      await request(redis, squatString);
      await request(redis, squatStream);
    }
    await waitFor(
      '4 requests handled and acknowledged',
      async () => handled.length === before + 4 && (await pendingCount(redis, RPC, GROUP)) === 0,
    );

    expect(await redis.get(squatString)).toBe('precious');
    expect(await redis.pttl(squatString)).toBe(-1);
    expect(await redis.xlen(squatStream)).toBe(12_000);
    expect(await redis.pttl(squatStream)).toBe(-1);
    const logged = (key: string) =>
      warn.mock.calls.filter(([message]) => String(message).includes(JSON.stringify(key)));
    expect(logged(squatString)).toHaveLength(1);
    expect(String(logged(squatString)[0][0])).toContain('it is a string, not a stream');
    expect(logged(squatStream)).toHaveLength(1);
    expect(String(logged(squatStream)[0][0])).toContain('no ClientRedisStreams created');
    warn.mockRestore();
  });
});
