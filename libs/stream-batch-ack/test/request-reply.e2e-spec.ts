import { Controller, INestMicroservice } from '@nestjs/common';
import {
  Ctx,
  Deserializer,
  MessagePattern,
  Payload,
  ReadPacket,
  RpcException,
  Serializer,
} from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { firstValueFrom, lastValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  RedisStreamsContext,
  RedisStreamsModule,
  RedisStreamsRecord,
  RequestTimeoutError,
  ServerRedisStreams,
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

const prefix = randomPrefix('request-reply');
const GROUP = 'rpc';
const SUM = `${prefix}sum`;
const DIVIDE = `${prefix}divide`;
const SLOW = `${prefix}slow`;
const NOBODY = `${prefix}nobody`;
const EVENTS = `${prefix}events`;
const SERDE_RPC = `${prefix}serde-rpc`;
const SERDE_EVENTS = `${prefix}serde-events`;
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

const sumCalls: { data: unknown; ctx: RedisStreamsContext }[] = [];
const events: { data: unknown; ctx: RedisStreamsContext }[] = [];
let divideCalls = 0;
let slowStarted = 0;
let releaseSlow: () => void = () => undefined;
const slowGate = new Promise<void>((resolve) => (releaseSlow = resolve));

@Controller()
class RpcController {
  @MessagePattern(SUM)
  sum(@Payload() data: { a: number; b: number }, @Ctx() ctx: RedisStreamsContext) {
    sumCalls.push({ data, ctx });
    return { sum: data.a + data.b };
  }

  @MessagePattern(DIVIDE)
  divide(@Payload() data: { a: number; b: number }) {
    divideCalls++;
    if (data.b === 0) throw new Error('cannot divide by zero');
    if (data.b < 0) throw new RpcException({ code: 'NEGATIVE_DIVISOR', b: data.b });
    return data.a / data.b;
  }

  @MessagePattern(SLOW)
  async slow() {
    slowStarted++;
    await slowGate;
    return 'late';
  }

  @StreamEventPattern(EVENTS)
  onEvent(@Payload() data: unknown, @Ctx() ctx: RedisStreamsContext) {
    events.push({ data, ctx });
  }
}

/** What a rejected observable carried, as text (an Error, a string or an object with a message). */
function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === 'string') return err;
  return JSON.stringify(err);
}

describe('request-reply: ClientRedisStreams.send() and @MessagePattern', () => {
  let redis: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;
  let client: ClientRedisStreams;
  const replyStreams: string[] = [];

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app, server } = await startMicroservice(
      { imports: [RedisStreamsModule.forRoot()], controllers: [RpcController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        claim: { minIdleMs: 10_000, intervalMs: 1000 },
        retry: { initialMs: 50, factor: 2, maxMs: 100, jitter: 0 },
        deadLetter: { maxDeliveries: 2 },
      },
    ));
    client = new ClientRedisStreams({ connection: REDIS_URL, replyTimeoutMs: 20_000 });
    await client.connect();
    replyStreams.push(client.replyStream);
  });

  afterAll(async () => {
    releaseSlow();
    await client.close();
    await app.close();
    await deleteKeys(redis, prefix);
    if (replyStreams.length > 0) await redis.del(...replyStreams);
    await redis.quit();
  });

  it('send() returns the result of the @MessagePattern handler', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => firstValueFrom(client.send(SUM, { a: i, b: 100 }))),
    );
    expect(results).toEqual(Array.from({ length: 20 }, (_, i) => ({ sum: i + 100 })));
    await waitFor('requests acked', async () => (await pendingCount(redis, SUM, GROUP)) === 0);
    // the replies were read and deleted from the reply stream; it expires unless the client lives:
    // at the latest 60 s after the longest wait for a reply (replyTimeoutMs 20 s)
    await waitFor('replies consumed', async () => (await redis.xlen(client.replyStream)) === 0);
    const pttl = await redis.pttl(client.replyStream);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(20_000 + 60_000);
  });

  it('an error thrown by the handler reaches the caller as an error', async () => {
    let caught: unknown;
    await firstValueFrom(client.send(DIVIDE, { a: 1, b: 0 })).catch((err) => (caught = err));
    expect(caught).toBeDefined();
    expect(messageOf(caught)).toContain('cannot divide by zero');
    // a request that succeeds on the same stream still answers
    await expect(firstValueFrom(client.send(DIVIDE, { a: 9, b: 3 }))).resolves.toBe(3);
    // the failed request was answered: acknowledged, not retried nor dead-lettered
    await waitFor('requests acked', async () => (await pendingCount(redis, DIVIDE, GROUP)) === 0);
    expect(divideCalls).toBe(2);
    expect(await redis.xlen(`${DIVIDE}:dlq`)).toBe(0);
  });

  it("an RpcException's error object reaches the caller as it is", async () => {
    let caught: unknown;
    await firstValueFrom(client.send(DIVIDE, { a: 1, b: -2 })).catch((err) => (caught = err));
    expect(caught).toEqual({ code: 'NEGATIVE_DIVISOR', b: -2 });
  });

  it('no consumer: send() fails with RequestTimeoutError after replyTimeoutMs', async () => {
    const impatient = new ClientRedisStreams({ connection: REDIS_URL, replyTimeoutMs: 300 });
    replyStreams.push(impatient.replyStream);
    const startedAt = Date.now();
    let caught: unknown;
    try {
      await firstValueFrom(impatient.send(NOBODY, { ping: 1 })).catch((err) => (caught = err));
    } finally {
      await impatient.close();
    }
    expect(caught).toBeInstanceOf(RequestTimeoutError);
    expect(caught).toMatchObject({ code: 'REQUEST_TIMEOUT', stream: NOBODY, timeoutMs: 300 });
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(300);
    expect(await redis.xlen(NOBODY)).toBe(1); // the request itself was written
  });

  it('a client that closed before its reply: the request fails, and the late reply is dropped (its reply stream is not created again)', async () => {
    const leaving = new ClientRedisStreams({ connection: REDIS_URL });
    replyStreams.push(leaving.replyStream);
    await leaving.connect();
    const reply = firstValueFrom(leaving.send(SLOW, {}));
    reply.catch(() => undefined);
    await waitFor('the slow handler started', () => slowStarted === 1);
    await leaving.close();
    await expect(reply).rejects.toThrow(/closed before the reply/);
    expect(await redis.exists(leaving.replyStream)).toBe(0); // deleted on close

    releaseSlow();
    await waitFor('the request acked', async () => (await pendingCount(redis, SLOW, GROUP)) === 0);
    expect(await redis.exists(leaving.replyStream)).toBe(0);
  });

  it('a client that got its replies deletes its reply stream on close', async () => {
    const tidy = new ClientRedisStreams({ connection: REDIS_URL });
    replyStreams.push(tidy.replyStream);
    await tidy.connect();
    await expect(firstValueFrom(tidy.send(SUM, { a: 1, b: 2 }))).resolves.toEqual({ sum: 3 });
    expect(await redis.exists(tidy.replyStream)).toBe(1);
    await tidy.close();
    expect(await redis.exists(tidy.replyStream)).toBe(0);
  });

  it('headers of a RedisStreamsRecord reach ctx.headers (emit to @EventPattern, send to @MessagePattern)', async () => {
    const id = await lastValueFrom(
      client.emit(EVENTS, new RedisStreamsRecord({ n: 1 }, { traceparent: TRACEPARENT })),
    );
    await lastValueFrom(client.emit(EVENTS, { n: 2 }));
    await waitFor('2 events handled', () => events.length === 2);
    expect(events[0].data).toEqual({ n: 1 });
    expect(events[0].ctx.id).toBe(id);
    expect(events[0].ctx.headers).toEqual({ traceparent: TRACEPARENT });
    expect(events[1].data).toEqual({ n: 2 });
    expect(events[1].ctx.headers).toEqual({});
    const [raw] = await readAll(redis, EVENTS);
    expect(JSON.parse(raw.fields.headers)).toEqual({ traceparent: TRACEPARENT });

    const before = sumCalls.length;
    await expect(
      firstValueFrom(
        client.send(SUM, new RedisStreamsRecord({ a: 2, b: 3 }, { traceparent: TRACEPARENT })),
      ),
    ).resolves.toEqual({ sum: 5 });
    expect(sumCalls[before].data).toEqual({ a: 2, b: 3 });
    expect(sumCalls[before].ctx.headers).toEqual({ traceparent: TRACEPARENT });
    expect(server.metrics().deadLettered).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// Nest serializer / deserializer options, on both sides.
// ---------------------------------------------------------------------------------------------

const ran = {
  clientSerializer: 0,
  serverDeserializer: 0,
  serverSerializer: 0,
  clientDeserializer: 0,
};

/** Client, outgoing: wraps the message as { wire: data }. */
class WrappingSerializer implements Serializer {
  serialize(packet: ReadPacket): ReadPacket {
    ran.clientSerializer++;
    return { ...packet, data: { wire: packet.data } };
  }
}
/** Server, incoming: unwraps { wire: data }; asynchronous, as Nest's Deserializer may be. */
class UnwrappingDeserializer implements Deserializer {
  async deserialize(value: { pattern: string; data: { wire: unknown }; id?: string }) {
    ran.serverDeserializer++;
    await Promise.resolve();
    return { ...value, data: value.data.wire };
  }
}
/** Server, replies: wraps the response as { reply: response }. */
class ReplySerializer implements Serializer {
  serialize(packet: { id: string; response?: unknown; err?: unknown; isDisposed?: boolean }) {
    ran.serverSerializer++;
    return { ...packet, response: { reply: packet.response } };
  }
}
/** Client, replies: unwraps { reply: response }. */
class ReplyDeserializer implements Deserializer {
  deserialize(value: { id: string; response?: { reply: unknown }; err?: unknown }) {
    ran.clientDeserializer++;
    return { ...value, response: value.response?.reply, isDisposed: true };
  }
}

const serdeEvents: unknown[] = [];
@Controller()
class SerdeController {
  @MessagePattern(SERDE_RPC)
  double(@Payload() data: { x: number }) {
    return { doubled: data.x * 2 };
  }

  @StreamEventPattern(SERDE_EVENTS)
  onEvent(@Payload() data: unknown) {
    serdeEvents.push(data);
  }
}

describe('request-reply: Nest serializer and deserializer options on both sides', () => {
  let redis: Redis;
  let app: INestMicroservice;
  let client: ClientRedisStreams;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app } = await startMicroservice(
      { controllers: [SerdeController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        serializer: new ReplySerializer(),
        deserializer: new UnwrappingDeserializer(),
      },
    ));
    client = new ClientRedisStreams({
      connection: REDIS_URL,
      serializer: new WrappingSerializer(),
      deserializer: new ReplyDeserializer(),
    });
    await client.connect();
  });

  afterAll(async () => {
    await client.close();
    await app.close();
    await deleteKeys(redis, prefix);
    await redis.del(client.replyStream);
    await redis.quit();
  });

  it('the client serializer wraps, the server deserializer unwraps; the reply goes the other way', async () => {
    await expect(firstValueFrom(client.send(SERDE_RPC, { x: 21 }))).resolves.toEqual({
      doubled: 42,
    });
    expect(ran).toEqual({
      clientSerializer: 1,
      serverDeserializer: 1,
      serverSerializer: 1,
      clientDeserializer: 1,
    });
    const [request] = await readAll(redis, SERDE_RPC);
    expect(JSON.parse(request.fields.data)).toEqual({ wire: { x: 21 } }); // as written on the wire

    await lastValueFrom(client.emit(SERDE_EVENTS, { kind: 'event' }));
    await waitFor('the event handled', () => serdeEvents.length === 1);
    expect(serdeEvents).toEqual([{ kind: 'event' }]);
    const [event] = await readAll(redis, SERDE_EVENTS);
    expect(JSON.parse(event.fields.data)).toEqual({ wire: { kind: 'event' } });
    expect(ran.clientSerializer).toBe(2);
    expect(ran.serverDeserializer).toBe(2);
  });
});
