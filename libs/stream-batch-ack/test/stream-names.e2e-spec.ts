/*
 * The option `streams`: a handler's pattern reads the stream that the configuration names
 * (`@StreamEventPattern('orders')` with `streams: { orders: <name> }`), partitioned or not.
 */
import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  RedisStreamsBatchContext,
  RedisStreamsContext,
  ServerRedisStreams,
  StreamBatchAckConfigError,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  REDIS_URL,
  startMicroservice,
  waitFor,
} from './support/helpers';

jest.setTimeout(60_000);

const prefix = randomPrefix('stream-names');
const ORDERS = `${prefix}orders`;
const TICKS = `${prefix}ticks`;
const QUOTES = `${prefix}quotes`;
const orders: { n: number; stream: string; logical: string }[] = [];
const ticks: { stream: string; logical: string; partition?: number; n: number[] }[] = [];

@Controller()
class ConfiguredController {
  @StreamEventPattern('orders')
  order(@Payload() order: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    if (order.n < 0) throw new Error('refused');
    orders.push({ n: order.n, stream: ctx.getStream(), logical: ctx.getLogicalStream() });
  }
  @StreamEventPattern('ticks', { batch: true })
  tick(@Payload() batch: { n: number }[], @Ctx() ctx: RedisStreamsBatchContext) {
    ticks.push({
      stream: ctx.getStream(),
      logical: ctx.getLogicalStream(),
      partition: ctx.getPartition(),
      n: batch.map((t) => t.n),
    });
  }
  @MessagePattern(QUOTES)
  quote(@Payload() q: { symbol: string }) {
    return `${q.symbol}:42`;
  }
}

describe('streams: { pattern: stream }', () => {
  let redis: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;
  let client: ClientRedisStreams;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app, server } = await startMicroservice(
      { controllers: [ConfiguredController] },
      {
        connection: REDIS_URL,
        group: 'g',
        streams: { orders: ORDERS, ticks: TICKS },
        partitions: { [TICKS]: 2 },
        read: { blockMs: 50 },
        ack: { intervalMs: 10 },
        deadLetter: { maxDeliveries: 1 },
      },
    ));
    client = new ClientRedisStreams({ connection: REDIS_URL, partitions: { [TICKS]: 2 } });
    await client.connect();
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis?.quit();
  });

  it('reads the configured streams, not streams named after the patterns', async () => {
    expect(server.streams.sort()).toEqual([ORDERS, QUOTES, TICKS].sort());
    expect(server.readerStreams.flat()).not.toContain('orders');
    await produce(redis, ORDERS, [{ n: 1 }, { n: -1 }, { n: 2 }]);
    await waitFor('2 handled', () => orders.length === 2);
    await waitFor('acked', async () => (await pendingCount(redis, ORDERS, 'g')) === 0);
    expect(orders).toEqual([
      { n: 1, stream: ORDERS, logical: ORDERS },
      { n: 2, stream: ORDERS, logical: ORDERS },
    ]);
    // The failed entry is dead-lettered beside its stream, as for a pattern that names it.
    expect(await redis.xlen(`${ORDERS}:dlq`)).toBe(1);
  });

  it('a mapped stream may be partitioned: its partitions are read by the handler of the pattern', async () => {
    for (let n = 0; n < 20; n++)
      await firstValueFrom(client.emit(TICKS, { n, symbol: `s${n % 5}` }));
    await waitFor('20 ticks handled', () => ticks.flatMap((t) => t.n).length === 20);
    expect(ticks.flatMap((t) => t.n).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 20 }, (_, n) => n),
    );
    expect(new Set(ticks.map((t) => t.logical))).toEqual(new Set([TICKS]));
    expect(new Set(ticks.map((t) => t.partition))).toEqual(new Set([0, 1]));
    for (const t of ticks) expect(t.stream).not.toBe(TICKS);
  });

  it('a pattern without a mapping is its stream, request-reply included', async () => {
    expect(await firstValueFrom(client.send(QUOTES, { symbol: 'ACME' }))).toBe('ACME:42');
  });
});

describe('streams: refused values', () => {
  const base = { connection: REDIS_URL, group: 'g' };
  const optionOf = (make: () => unknown) => {
    try {
      make();
    } catch (err) {
      expect(err).toBeInstanceOf(StreamBatchAckConfigError);
      return (err as StreamBatchAckConfigError).option;
    }
    return undefined;
  };

  it('not an object, an empty name, two patterns on one stream', () => {
    expect(optionOf(() => new ServerRedisStreams({ ...base, streams: 'x' as never }))).toBe(
      'streams',
    );
    expect(optionOf(() => new ServerRedisStreams({ ...base, streams: { a: '' } }))).toBe(
      'streams.a',
    );
    expect(optionOf(() => new ServerRedisStreams({ ...base, streams: { a: 's', b: 's' } }))).toBe(
      'streams.b',
    );
  });

  it('a pattern mapped onto the stream of another handler fails at listen', async () => {
    @Controller()
    class Clash {
      @StreamEventPattern('a')
      a() {}
      @StreamEventPattern(`${prefix}b`)
      b() {}
    }
    const moduleRef = await Test.createTestingModule({ controllers: [Clash] }).compile();
    const app = moduleRef.createNestMicroservice({
      strategy: new ServerRedisStreams({ ...base, streams: { a: `${prefix}b` } }),
      logger: false,
    });
    const err = await app.listen().then(
      () => undefined,
      (e: unknown) => e,
    );
    await app.close();
    expect(err).toBeInstanceOf(StreamBatchAckConfigError);
    expect((err as StreamBatchAckConfigError).option).toBe('streams');
    expect((err as Error).message).toContain(`would both read the stream "${prefix}b"`);
  });
});
