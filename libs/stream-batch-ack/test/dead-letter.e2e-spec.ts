import { Controller, INestMicroservice } from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { Ctx, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  RedisStreamsContext,
  RedisStreamsModule,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
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

const prefix = randomPrefix('dead-letter');
const STREAM = `${prefix}orders`;
const FORMATS = `${prefix}formats`;
const GROUP = 'workers';

const attempts = new Map<number, number[]>(); // n -> deliveries seen
const received: { payload: unknown; id: string }[] = [];

@Controller()
class OrdersController {
  @StreamEventPattern(STREAM)
  async handle(@Payload() order: { n: number; poison?: boolean }, @Ctx() ctx: RedisStreamsContext) {
    attempts.set(order.n, [...(attempts.get(order.n) ?? []), ctx.deliveries]);
    await new Promise((r) => setImmediate(r));
    if (order.poison) throw new Error(`cannot process order ${order.n}`);
  }

  @StreamEventPattern(FORMATS)
  handleFormats(@Payload() payload: unknown, @Ctx() ctx: RedisStreamsContext) {
    received.push({ payload, id: ctx.id });
  }
}

describe('failures: throwing handlers, malformed and foreign entries', () => {
  let redis: Redis;
  let app: INestMicroservice;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app } = await startMicroservice(
      { imports: [RedisStreamsModule.forRoot()], controllers: [OrdersController] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 500, intervalMs: 20 },
        claim: { minIdleMs: 100, intervalMs: 50, count: 100 },
        deadLetter: { maxDeliveries: 3 },
      },
    ));
  });

  afterAll(async () => {
    await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a throwing handler: not acked, retried with backoff, then dead-lettered with its error after maxDeliveries; the others flowed on', async () => {
    const payloads = Array.from({ length: 20 }, (_, n) => ({ n, poison: n === 4 || n === 13 }));
    const ids = await produce(redis, STREAM, payloads);
    await waitFor(
      '2 entries in the dead-letter stream',
      async () => (await redis.xlen(`${STREAM}:dlq`)) === 2,
      15_000,
    );
    await waitFor('nothing pending', async () => (await pendingCount(redis, STREAM, GROUP)) === 0);

    // every healthy message handled exactly once, on its first delivery
    for (const p of payloads.filter((p) => !p.poison)) expect(attempts.get(p.n)).toEqual([1]);
    // every poison message tried exactly maxDeliveries times: 1 read + 2 claims
    expect(attempts.get(4)).toEqual([1, 2, 3]);
    expect(attempts.get(13)).toEqual([1, 2, 3]);

    const dlq = await readAll(redis, `${STREAM}:dlq`);
    const byId = new Map(dlq.map((e) => [e.fields.id, e.fields]));
    for (const n of [4, 13]) {
      const entry = byId.get(ids[n]);
      expect(entry).toMatchObject({
        stream: STREAM,
        group: GROUP,
        deliveries: '3',
        reason: 'handler-failed',
        error: `cannot process order ${n}`, // the original error, not Nest's "Internal server error"
        errorName: 'Error',
      });
      expect(JSON.parse(JSON.parse(entry!.fields).data)).toEqual({ n, poison: true });
    }
    // the source stream still holds every entry (dead-lettering acks, it does not delete)
    expect(await redis.xlen(STREAM)).toBe(20);
  });

  it('malformed JSON in "data" goes to the dead-letter stream; foreign entries arrive as a plain object; client entries as their JSON', async () => {
    const client = new ClientRedisStreams({ connection: REDIS_URL });
    await client.connect();
    const badId = (await redis.xadd(FORMATS, '*', 'data', '{"broken":')) as string;
    const foreignId = (await redis.xadd(FORMATS, '*', 'symbol', 'BTC', 'price', '1')) as string;
    const clientId = await lastValueFrom(
      client.emit(FORMATS, { symbol: 'ETH', price: 2.5, tags: ['x'] }),
    );
    await client.close();

    await waitFor(
      '2 handled, 1 dead-lettered',
      async () => received.length === 2 && (await redis.xlen(`${FORMATS}:dlq`)) === 1,
    );
    await waitFor('nothing pending', async () => (await pendingCount(redis, FORMATS, GROUP)) === 0);
    expect(received).toEqual([
      { id: foreignId, payload: { symbol: 'BTC', price: '1' } },
      { id: clientId, payload: { symbol: 'ETH', price: 2.5, tags: ['x'] } },
    ]);
    const [dead] = await readAll(redis, `${FORMATS}:dlq`);
    expect(dead.fields).toMatchObject({
      id: badId,
      reason: 'malformed',
      deliveries: '1',
      errorName: 'MalformedEntryError',
    });
    expect(dead.fields.error).toContain('not valid JSON');
    expect(JSON.parse(dead.fields.fields)).toEqual({ data: '{"broken":' });
  });
});

describe('ClientsModule.register with customClass', () => {
  it('emits through ClientRedisStreams resolved from DI', async () => {
    const stream = `${prefix}di`;
    const moduleRef = await Test.createTestingModule({
      imports: [
        ClientsModule.register([
          { name: 'TICKS', customClass: ClientRedisStreams, options: { connection: REDIS_URL } },
        ]),
      ],
    }).compile();
    const client = moduleRef.get<ClientRedisStreams>('TICKS');
    expect(client).toBeInstanceOf(ClientRedisStreams);
    await lastValueFrom(client.emit(stream, { a: 1 }));
    await moduleRef.close();
    const redis = new Redis(REDIS_URL);
    const rows = await readAll(redis, stream);
    expect(rows.map((r) => r.fields)).toEqual([{ data: '{"a":1}' }]);
    await deleteKeys(redis, prefix);
    await redis.quit();
  });
});
