import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, Deserializer, MessagePattern, Payload, ReadPacket } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { AsyncLocalStorage } from 'node:async_hooks';
import { firstValueFrom, lastValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  RedisStreamsBatchContext,
  RedisStreamsContext,
  RedisStreamsRecord,
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

const prefix = randomPrefix('packet-metadata');
const GROUP = 'g';
const EVENTS = `${prefix}events`;
const RPC = `${prefix}rpc`;
const BATCH = `${prefix}batch`;
const DESERIALIZED = `${prefix}deserialized`;

const seen: { data: unknown; metadata: Record<string, string>; headers: unknown }[] = [];
const batches: {
  ids: string[];
  shared: Record<string, string>;
  perEntry: Record<string, string>[];
}[] = [];

@Controller()
class MetadataController {
  @StreamEventPattern(EVENTS)
  onEvent(@Payload() data: unknown, @Ctx() ctx: RedisStreamsContext) {
    seen.push({ data, metadata: { ...ctx.getMetadata() }, headers: ctx.headers });
  }

  @MessagePattern(RPC)
  answer(@Payload() data: { q: string }, @Ctx() ctx: RedisStreamsContext) {
    return { q: data.q, requestId: ctx.getMetadata().requestId ?? null };
  }

  @StreamEventPattern(BATCH, { batch: true })
  onBatch(@Payload() _data: unknown[], @Ctx() ctx: RedisStreamsBatchContext) {
    batches.push({
      ids: ctx.entries.map((e) => e.id),
      shared: { ...ctx.getMetadata() },
      perEntry: ctx.entries.map((e) => ({ ...ctx.getMetadata(e.id) })),
    });
  }
}

/** Records what the deserializer was given (the metadata of the packet included). */
const deserializerSaw: { metadata?: Record<string, string> }[] = [];
class RecordingDeserializer implements Deserializer {
  deserialize(packet: { pattern: string; data: unknown; metadata?: Record<string, string> }) {
    deserializerSaw.push({ metadata: packet.metadata });
    return packet;
  }
}
const deserializedSeen: Record<string, string>[] = [];
@Controller()
class DeserializedController {
  @StreamEventPattern(DESERIALIZED)
  onEvent(@Payload() _data: unknown, @Ctx() ctx: RedisStreamsContext) {
    deserializedSeen.push({ ...ctx.getMetadata() });
  }
}

/** The request id of the current "HTTP request", as an app would keep it. */
const requestContext = new AsyncLocalStorage<{ requestId: string }>();
function withRequest<T>(requestId: string, fn: () => T): T {
  return requestContext.run({ requestId }, fn);
}
/** The dispatch hook of the producer: puts the current request id into every packet's metadata. */
function addRequestId(packet: ReadPacket): void {
  const store = requestContext.getStore();
  if (store) packet.metadata = { ...packet.metadata, requestId: store.requestId };
}

describe('packet metadata (NestJS 12 dispatch hook) across the hop', () => {
  let redis: Redis;
  let app: INestMicroservice;
  let app2: INestMicroservice;
  let client: ClientRedisStreams;
  let plain: ClientRedisStreams;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app } = await startMicroservice(
      { controllers: [MetadataController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
      },
    ));
    ({ app: app2 } = await startMicroservice(
      { controllers: [DeserializedController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c2',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        deserializer: new RecordingDeserializer(),
      },
    ));
    client = new ClientRedisStreams({ connection: REDIS_URL, replyTimeoutMs: 20_000 });
    client.setOnDispatchHook(addRequestId);
    await client.connect();
    plain = new ClientRedisStreams({ connection: REDIS_URL });
    await plain.connect();
  });

  afterAll(async () => {
    await client.close();
    await plain.close();
    await app.close();
    await app2.close();
    await deleteKeys(redis, prefix);
    await redis.del(client.replyStream, plain.replyStream);
    await redis.quit();
  });

  it('emit(): the request id set by the dispatch hook is in ctx.getMetadata() and in the entry headers', async () => {
    const id = await withRequest('req-1', () => lastValueFrom(client.emit(EVENTS, { n: 1 })));
    await lastValueFrom(client.emit(EVENTS, { n: 2 })); // outside a request: no metadata
    await waitFor('2 events handled', () => seen.length === 2);
    expect(seen[0]).toEqual({
      data: { n: 1 },
      metadata: { requestId: 'req-1' },
      headers: { requestId: 'req-1' },
    });
    expect(seen[1]).toEqual({ data: { n: 2 }, metadata: {}, headers: {} });
    const entries = await readAll(redis, EVENTS);
    expect(entries[0].id).toBe(id);
    expect(JSON.parse(entries[0].fields.headers)).toEqual({ requestId: 'req-1' });
    expect(entries[1].fields.headers).toBeUndefined(); // no metadata, no headers field
    await waitFor('acked', async () => (await pendingCount(redis, EVENTS, GROUP)) === 0);
  });

  it('send(): the @MessagePattern handler reads the request id from ctx.getMetadata()', async () => {
    const replies = await Promise.all(
      ['a', 'b', 'c'].map((q) =>
        withRequest(`req-${q}`, () => firstValueFrom(client.send(RPC, { q }))),
      ),
    );
    expect(replies).toEqual([
      { q: 'a', requestId: 'req-a' },
      { q: 'b', requestId: 'req-b' },
      { q: 'c', requestId: 'req-c' },
    ]);
    // a client without a hook sends no metadata
    await expect(firstValueFrom(plain.send(RPC, { q: 'd' }))).resolves.toEqual({
      q: 'd',
      requestId: null,
    });
  });

  it('headers set on a RedisStreamsRecord win over metadata of the same name; the rest of the metadata is kept', async () => {
    client.setOnDispatchHook((packet) => {
      addRequestId(packet);
      packet.metadata = { ...packet.metadata, tenant: 'from-metadata' };
    });
    try {
      await withRequest('req-2', () =>
        lastValueFrom(
          client.emit(
            EVENTS,
            new RedisStreamsRecord({ n: 3 }, { requestId: 'explicit', locale: 'fr' }),
          ),
        ),
      );
      await waitFor('3 events handled', () => seen.length === 3);
      expect(seen[2].metadata).toEqual({
        requestId: 'explicit',
        locale: 'fr',
        tenant: 'from-metadata',
      });
      await expect(
        withRequest('req-3', () =>
          firstValueFrom(client.send(RPC, new RedisStreamsRecord({ q: 'e' }, { requestId: 'x' }))),
        ),
      ).resolves.toEqual({ q: 'e', requestId: 'x' });
    } finally {
      client.setOnDispatchHook(addRequestId);
    }
  });

  it('a batch handler: getMetadata(id) per entry, getMetadata() what every entry shares', async () => {
    client.setOnDispatchHook((packet) => {
      addRequestId(packet);
      packet.metadata = { ...packet.metadata, tenant: 'acme' };
    });
    try {
      // emitted together: one batch, or several (a batch of one shares all its metadata)
      const ids = await Promise.all(
        ['b1', 'b2', 'b3'].map((r) =>
          withRequest(r, () => lastValueFrom(client.emit(BATCH, { r }))),
        ),
      );
      await waitFor('3 batch entries handled', () => batches.flatMap((b) => b.ids).length === 3);
      const byId = new Map<string, Record<string, string>>();
      for (const b of batches) b.ids.forEach((id, i) => byId.set(id, b.perEntry[i]));
      expect(ids.map((id) => byId.get(id as string))).toEqual([
        { requestId: 'b1', tenant: 'acme' },
        { requestId: 'b2', tenant: 'acme' },
        { requestId: 'b3', tenant: 'acme' },
      ]);
      for (const b of batches)
        expect(b.shared).toEqual(
          b.ids.length === 1 ? byId.get(b.ids[0]) : { tenant: 'acme' }, // request ids differ
        );
    } finally {
      client.setOnDispatchHook(addRequestId);
    }
  });

  it('a custom deserializer is given the metadata in packet.metadata', async () => {
    await withRequest('req-4', () => lastValueFrom(client.emit(DESERIALIZED, { n: 1 })));
    await lastValueFrom(plain.emit(DESERIALIZED, { n: 2 }));
    await waitFor('2 handled', () => deserializedSeen.length === 2);
    expect(deserializerSaw).toEqual([
      { metadata: { requestId: 'req-4' } },
      { metadata: undefined },
    ]);
    expect(deserializedSeen).toEqual([{ requestId: 'req-4' }, {}]);
  });

  it('metadata that is not a string map fails the emit, and nothing is written', async () => {
    const strict = new ClientRedisStreams({ connection: REDIS_URL });
    strict.setOnDispatchHook((packet) => {
      packet.metadata = { attempt: 2 } as unknown as Record<string, string>;
    });
    try {
      await strict.connect();
      const before = await redis.xlen(EVENTS);
      await expect(lastValueFrom(strict.emit(EVENTS, { n: 9 }))).rejects.toThrow(
        'Packet metadata "attempt" must be a string, got number',
      );
      await expect(firstValueFrom(strict.send(RPC, { q: 'z' }))).rejects.toThrow(
        'Packet metadata "attempt" must be a string, got number',
      );
      expect(await redis.xlen(EVENTS)).toBe(before);
    } finally {
      await strict.close();
      await redis.del(strict.replyStream);
    }
  });
});
