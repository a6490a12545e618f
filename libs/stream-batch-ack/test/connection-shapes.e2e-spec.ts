/*
 * Every connection option takes every shape: a URL, ioredis options, { cluster: nodes }, or an
 * ioredis client. A given client stays the app's: the transport opens connections of its own
 * with its settings (client.duplicate()) and closes only those.
 */
import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { Cluster, Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  Idempotent,
  RedisStreamsContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
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

const prefix = randomPrefix('shapes');
const ORDERS = `${prefix}orders`;
const PRICES = `${prefix}prices`;
const handled: string[] = [];

@Controller()
class OrdersController {
  @StreamEventPattern(ORDERS)
  handle(@Payload() order: { n: number }, @Ctx() ctx: RedisStreamsContext) {
    handled.push(`${ctx.stream} ${order.n}`);
  }
  @MessagePattern(PRICES)
  price(@Payload() q: { symbol: string }) {
    return `${q.symbol}:42`;
  }
}

describe('connection: an ioredis client the app made', () => {
  let given: Redis;
  let app: INestMicroservice;
  let server: ServerRedisStreams;
  let client: ClientRedisStreams;

  beforeAll(async () => {
    given = new Redis(REDIS_URL);
    ({ app, server } = await startMicroservice(
      { controllers: [OrdersController] },
      { connection: given, group: 'g', read: { blockMs: 50 }, ack: { intervalMs: 10 } },
    ));
    client = new ClientRedisStreams({ connection: given });
    await client.connect();
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await deleteKeys(given, prefix);
    given?.disconnect();
  });

  it('the server reads and acks on connections of its own, not on the given client', async () => {
    const [reader, commands] = server.unwrap<[Redis, Redis]>();
    expect(reader).not.toBe(given);
    expect(commands).not.toBe(given);
    await produce(given, ORDERS, [{ n: 1 }, { n: 2 }]);
    await waitFor('2 handled', () => handled.length === 2);
    await waitFor('acked', async () => (await pendingCount(given, ORDERS, 'g')) === 0);
    expect(handled).toEqual([`${ORDERS} 1`, `${ORDERS} 2`]);
  });

  it('the client emits and gets replies (its blocking reply reader is a connection of its own)', async () => {
    await firstValueFrom(client.emit(ORDERS, { n: 3 }));
    await waitFor('3 handled', () => handled.length === 3);
    expect(await firstValueFrom(client.send(PRICES, { symbol: 'ACME' }))).toBe('ACME:42');
  });

  it('closing the client and the server leaves the given client open', async () => {
    const [reader, commands] = server.unwrap<[Redis, Redis]>();
    await client.close();
    await app.close();
    await waitFor('own connections closed', () =>
      [reader, commands].every((c) => c.status === 'end'),
    );
    expect(given.status).toBe('ready');
    expect(await given.ping()).toBe('PONG');
  });
});

const TAG = '{sba-shapes}';
const TICKS = `${TAG}:ticks`;
const IDEM = `sba:idem:${TAG}:`;
const ticks: number[] = [];

@Controller()
class TicksController {
  @StreamEventPattern(TICKS)
  @Idempotent({ key: (tick: { n: number }) => `tick-${tick.n}` })
  handle(@Payload() tick: { n: number }) {
    ticks.push(tick.n);
  }
}

describe('a Cluster client as the connection, { cluster: nodes } for idempotency (throwaway 3-node cluster)', () => {
  let redisCluster: ThrowawayCluster;
  let given: Cluster;
  let app: INestMicroservice;
  let server: ServerRedisStreams;
  let client: ClientRedisStreams;

  beforeAll(async () => {
    redisCluster = await ThrowawayCluster.start();
    given = new Cluster(redisCluster.nodes);
    ({ app, server } = await startMicroservice(
      { controllers: [TicksController] },
      {
        connection: given,
        group: 'g',
        read: { blockMs: 50 },
        ack: { intervalMs: 10 },
        idempotency: { store: 'redis', redis: { cluster: redisCluster.nodes }, keyPrefix: IDEM },
      },
    ));
    client = new ClientRedisStreams({ connection: given });
    await client.connect();
  }, 30_000);

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await given?.quit();
    await redisCluster?.destroy();
  }, 15_000);

  it('reads through Cluster connections of its own; idempotency records on the cluster, a duplicate skipped', async () => {
    const [reader, commands] = server.unwrap<[Cluster, Cluster]>();
    expect(reader).toBeInstanceOf(Cluster);
    expect(commands).toBeInstanceOf(Cluster);
    expect(reader).not.toBe(given);
    await firstValueFrom(client.emit(TICKS, { n: 1 }));
    await firstValueFrom(client.emit(TICKS, { n: 2 }));
    await waitFor('2 handled', () => ticks.length === 2);
    await waitFor(
      'acked',
      async () => Number(((await given.call('XPENDING', TICKS, 'g')) as [number])[0]) === 0,
    );
    // The record of a handled key is on the cluster (L2), through the client made from `{ cluster }`.
    expect(await given.exists(`${IDEM}g:tick-1`, `${IDEM}g:tick-2`)).toBe(2);
    await firstValueFrom(client.emit(TICKS, { n: 1 }));
    await firstValueFrom(client.emit(TICKS, { n: 3 }));
    await waitFor('3 handled', () => ticks.length === 3);
    expect(ticks).toEqual([1, 2, 3]);
  });

  it('closing leaves the given Cluster client open', async () => {
    await client.close();
    await app.close();
    expect(given.status).toBe('ready');
    expect(await given.exists(TICKS)).toBe(1);
  });
});
