import { Controller, INestMicroservice } from '@nestjs/common';
import {
  Ctx,
  Deserializer,
  MessagePattern,
  Payload,
  ReadPacket,
  Serializer,
} from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { firstValueFrom, lastValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
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

const prefix = randomPrefix('async-serializers');
const GROUP = 'g';

/** Resolves on a later turn of the event loop: a real asynchronous step (a key fetch, a schema registry). */
const later = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Counts {
  clientSerializer: number;
  serverDeserializer: number;
  serverSerializer: number;
  clientDeserializer: number;
}

/**
 * The four (de)serializers of a round trip, each wrapping or unwrapping one layer so that the
 * wire shows it ran, synchronous or asynchronous (`async`).
 */
function serdes(async: boolean, counts: Counts) {
  const maybeLater = async ? later : () => undefined;
  return {
    client: {
      serializer: {
        serialize(packet: ReadPacket) {
          counts.clientSerializer++;
          // A record keeps its headers: the serializer wraps its data.
          const { data } = packet;
          const out = {
            ...packet,
            data:
              data instanceof RedisStreamsRecord
                ? new RedisStreamsRecord({ wire: data.data }, data.headers, data.options)
                : { wire: data },
          };
          return async ? maybeLater()!.then(() => out) : out;
        },
      } satisfies Serializer,
      deserializer: {
        deserialize(value: { id: string; response?: { reply: unknown }; err?: unknown }) {
          counts.clientDeserializer++;
          const out = { ...value, response: value.response?.reply, isDisposed: true };
          return async ? maybeLater()!.then(() => out) : out;
        },
      } satisfies Deserializer,
    },
    server: {
      serializer: {
        serialize(packet: { id: string; response?: unknown; err?: unknown }) {
          counts.serverSerializer++;
          const out = { ...packet, response: { reply: packet.response } };
          return async ? maybeLater()!.then(() => out) : out;
        },
      } satisfies Serializer,
      deserializer: {
        deserialize(value: { pattern: string; data: { wire: unknown }; id?: string }) {
          counts.serverDeserializer++;
          const out = { ...value, data: value.data.wire };
          return async ? maybeLater()!.then(() => out) : out;
        },
      } satisfies Deserializer,
    },
  };
}

for (const mode of ['async', 'sync'] as const) {
  const RPC = `${prefix}${mode}:rpc`;
  const EVENTS = `${prefix}${mode}:events`;
  const events: { data: unknown; headers: unknown }[] = [];

  @Controller()
  class SerdeController {
    @MessagePattern(RPC)
    double(@Payload() data: { x: number }) {
      return { doubled: data.x * 2 };
    }

    @StreamEventPattern(EVENTS)
    onEvent(@Payload() data: unknown, @Ctx() ctx: RedisStreamsContext) {
      events.push({ data, headers: ctx.headers });
    }
  }

  describe(`${mode} serializers and deserializers on both sides`, () => {
    const counts: Counts = {
      clientSerializer: 0,
      serverDeserializer: 0,
      serverSerializer: 0,
      clientDeserializer: 0,
    };
    const s = serdes(mode === 'async', counts);
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
          serializer: s.server.serializer,
          deserializer: s.server.deserializer,
        },
      ));
      client = new ClientRedisStreams({
        connection: REDIS_URL,
        replyTimeoutMs: 20_000,
        serializer: s.client.serializer,
        deserializer: s.client.deserializer,
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

    it('send(): serialized by the client, deserialized by the server, the reply serialized and deserialized back', async () => {
      const replies = await Promise.all(
        [1, 2, 3].map((x) => firstValueFrom(client.send(RPC, { x }))),
      );
      expect(replies).toEqual([{ doubled: 2 }, { doubled: 4 }, { doubled: 6 }]);
      expect(counts).toEqual({
        clientSerializer: 3,
        serverDeserializer: 3,
        serverSerializer: 3,
        clientDeserializer: 3,
      });
      const written = await readAll(redis, RPC);
      expect(written.map((e) => JSON.parse(e.fields.data))).toEqual(
        expect.arrayContaining([{ wire: { x: 1 } }, { wire: { x: 2 } }, { wire: { x: 3 } }]),
      );
      await waitFor('requests acked', async () => (await pendingCount(redis, RPC, GROUP)) === 0);
    });

    it('emit(): the entry holds what the serializer returned, in emit order; a record keeps its headers', async () => {
      const ids: string[] = [];
      for (let n = 1; n <= 3; n++) ids.push(await lastValueFrom(client.emit(EVENTS, { n })));
      await lastValueFrom(client.emit(EVENTS, new RedisStreamsRecord({ n: 4 }, { k: 'v' })));
      await waitFor('4 events handled', () => events.length === 4);
      expect(events).toEqual([
        { data: { n: 1 }, headers: {} },
        { data: { n: 2 }, headers: {} },
        { data: { n: 3 }, headers: {} },
        { data: { n: 4 }, headers: { k: 'v' } },
      ]);
      const written = await readAll(redis, EVENTS);
      expect(written.slice(0, 3).map((e) => e.id)).toEqual(ids);
      expect(JSON.parse(written[0].fields.data)).toEqual({ wire: { n: 1 } });
      expect(JSON.parse(written[3].fields.data)).toEqual({ wire: { n: 4 } });
      expect(JSON.parse(written[3].fields.headers)).toEqual({ k: 'v' });
      await waitFor('events acked', async () => (await pendingCount(redis, EVENTS, GROUP)) === 0);
    });
  });
}

describe('a serializer that rejects', () => {
  const STREAM = `${prefix}rejects`;
  let redis: Redis;
  let client: ClientRedisStreams;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    client = new ClientRedisStreams({
      connection: REDIS_URL,
      replyTimeoutMs: 20_000,
      serializer: {
        async serialize() {
          await later();
          throw new Error('schema registry unreachable');
        },
      },
    });
    await client.connect();
  });

  afterAll(async () => {
    await client.close();
    await deleteKeys(redis, prefix);
    await redis.del(client.replyStream);
    await redis.quit();
  });

  it('fails emit() and send() with its error, and writes nothing', async () => {
    await expect(lastValueFrom(client.emit(STREAM, { n: 1 }))).rejects.toThrow(
      'schema registry unreachable',
    );
    await expect(firstValueFrom(client.send(STREAM, { n: 2 }))).rejects.toThrow(
      'schema registry unreachable',
    );
    expect(await redis.exists(STREAM)).toBe(0);
  });
});
