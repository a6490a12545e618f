import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, MessagePattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Cluster } from 'ioredis';
import { keySlot } from '../src/redis/keys';
import { firstValueFrom } from 'rxjs';
import {
  ClientRedisStreams,
  RedisStreamsBatchContext,
  RedisStreamsContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { ThrowawayCluster } from '../../../test/support/throwaway-cluster';
import { startMicroservice, waitFor } from './support/helpers';

// A 3-master Redis Cluster of its own: streams in different hash slots are read by one blocking
// reader each, streams sharing a hash tag by one reader together.
const A1 = '{sba-a}:ticks';
const A2 = '{sba-a}:trades';
const B = '{sba-b}:ticks';
const GROUP = 'g';

const handled = new Map<string, number>(); // `${stream} ${id}` -> runs

@Controller()
class ClusterController {
  @StreamEventPattern(A1)
  a1(@Payload() _d: unknown, @Ctx() ctx: RedisStreamsContext) {
    this.count(ctx);
  }
  @StreamEventPattern(A2)
  a2(@Payload() _d: unknown, @Ctx() ctx: RedisStreamsContext) {
    this.count(ctx);
  }
  @StreamEventPattern(B)
  b(@Payload() data: { fail?: boolean }, @Ctx() ctx: RedisStreamsContext) {
    this.count(ctx);
    if (data.fail) throw new Error('poison');
  }
  private count(ctx: RedisStreamsContext) {
    const key = `${ctx.stream} ${ctx.id}`;
    handled.set(key, (handled.get(key) ?? 0) + 1);
  }
}

const C1 = '{sba-c}:orders';
const C2 = '{sba-d}:orders';
const QUOTES = '{sba-e}:quotes';
const batches: { stream: string; ids: string[]; records: string[] }[] = [];

@Controller()
class ClusterBatchController {
  @StreamEventPattern(C1, { batch: true })
  c1(@Payload() _d: unknown[], @Ctx() ctx: RedisStreamsBatchContext) {
    this.record(ctx);
  }
  @StreamEventPattern(C2, { batch: true })
  c2(@Payload() _d: unknown[], @Ctx() ctx: RedisStreamsBatchContext) {
    this.record(ctx);
  }
  @MessagePattern(QUOTES)
  quote(@Payload() q: { symbol: string }) {
    return `${q.symbol}:42`;
  }
  private record(ctx: RedisStreamsBatchContext) {
    batches.push({
      stream: ctx.stream,
      ids: ctx.entries.map((e) => e.id),
      records: ctx.entries.map((e) => e.idempotencyRecord!),
    });
  }
}

async function pending(cluster: Cluster, stream: string): Promise<number> {
  return Number(((await cluster.call('XPENDING', stream, GROUP)) as [number])[0]);
}

describe('Redis Cluster: one reader per hash slot (throwaway 3-node cluster)', () => {
  let redisCluster: ThrowawayCluster;
  let cluster: Cluster;
  let app: INestMicroservice;
  let server: ServerRedisStreams;

  beforeAll(async () => {
    expect(keySlot(A1)).toBe(keySlot(A2));
    expect(keySlot(A1)).not.toBe(keySlot(B));
    redisCluster = await ThrowawayCluster.start();
    cluster = new Cluster(redisCluster.nodes);
    ({ app, server } = await startMicroservice(
      { controllers: [ClusterController] },
      {
        connection: { cluster: redisCluster.nodes },
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        deadLetter: { maxDeliveries: 1 },
      },
    ));
  }, 30_000);

  afterAll(async () => {
    await app?.close();
    await cluster?.quit();
    await redisCluster?.destroy();
  }, 15_000);

  it('reads every stream (two readers: the shared-slot pair together), handles each message once, acks all, dead-letters in the slot of the stream', async () => {
    expect(server.readerStreams.map((g) => [...g].sort()).sort()).toEqual([[A1, A2], [B]]);
    const ids: string[] = [];
    for (let n = 0; n < 60; n++) {
      const stream = [A1, A2, B][n % 3];
      const id = (await cluster.xadd(stream, '*', 'data', JSON.stringify({ n, fail: n === 2 })))!;
      ids.push(`${stream} ${id}`);
    }
    await waitFor('60 handled', () => ids.every((k) => handled.has(k)), 15_000);
    await waitFor(
      'pending lists empty',
      async () =>
        (await pending(cluster, A1)) +
          (await pending(cluster, A2)) +
          (await pending(cluster, B)) ===
        0,
      10_000,
    );
    expect([...handled.keys()].sort()).toEqual([...ids].sort());
    expect([...handled.values()].every((n) => n === 1)).toBe(true);
    const dead = (await cluster.call('XRANGE', `${B}:dlq`, '-', '+')) as [string, string[]][];
    expect(dead).toHaveLength(1);
    expect(`${B} ${dead[0][1][dead[0][1].indexOf('id') + 1]}`).toBe(ids[2]);
  });

  it('refuses to start when a stream and its dead-letter stream are in different slots, and says what to do', async () => {
    @Controller()
    class Untagged {
      @StreamEventPattern('sba-untagged-stream')
      handle() {}
    }
    const moduleRef = await Test.createTestingModule({ controllers: [Untagged] }).compile();
    const other = moduleRef.createNestMicroservice({
      strategy: new ServerRedisStreams({
        connection: { cluster: redisCluster.nodes },
        group: GROUP,
      }),
      logger: false,
    });
    await expect(other.listen()).rejects.toThrow(/hash tag/);
    await other.close();
  });

  it('ClientRedisStreams emits and sends on a Cluster; batch handlers with Redis idempotency keep their records in the slot of their stream', async () => {
    expect(keySlot(C1)).not.toBe(keySlot(C2));
    const { app: batchApp } = await startMicroservice(
      { controllers: [ClusterBatchController] },
      {
        connection: { cluster: redisCluster.nodes },
        group: GROUP,
        consumer: 'c2',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        idempotency: { store: 'redis', keyPrefix: 'sba-test-cluster:idem:' },
      },
    );
    const client = new ClientRedisStreams({ connection: { cluster: redisCluster.nodes } });
    try {
      await client.connect();
      const ids: string[] = [];
      const streamIds: string[] = []; // the same id can be given by two streams
      for (let n = 0; n < 40; n++) {
        const stream = n % 2 ? C1 : C2;
        const id: string = await firstValueFrom(client.emit(stream, { n }));
        ids.push(id);
        streamIds.push(`${stream}/${id}`);
      }
      await expect(firstValueFrom(client.send<string>(QUOTES, { symbol: 'BTC' }))).resolves.toBe(
        'BTC:42',
      );
      await waitFor(
        '40 handled and acked',
        async () =>
          batches.flatMap((b) => b.ids).length === 40 &&
          (await pending(cluster, C1)) + (await pending(cluster, C2)) === 0,
        15_000,
      );
      expect(batches.flatMap((b) => b.ids).sort()).toEqual([...ids].sort());
      // The records given to the handlers are in the slot of their stream...
      for (const batch of batches)
        for (const record of batch.records) expect(keySlot(record)).toBe(keySlot(batch.stream));
      // ...and so are the done sets of the default key, which hold every handled id.
      const doneKeys: string[] = [];
      for (const node of cluster.nodes('master'))
        doneKeys.push(...(await node.keys('sba-test-cluster:idem:*:done:*')));
      const doneIds = new Set<string>();
      for (const key of doneKeys) {
        const stream = [C1, C2].find((s) => key.includes(`:${s}:done:`));
        if (!stream) continue; // another stream's (the request-reply one)
        expect(keySlot(key)).toBe(keySlot(stream));
        if (key.endsWith(':done:max')) continue; // the greatest done id, a string
        for (const id of await cluster.smembers(key)) doneIds.add(`${stream}/${id}`);
      }
      expect([...doneIds].sort()).toEqual([...streamIds].sort());
      for (const key of doneKeys) await cluster.del(key);
    } finally {
      await client.close();
      await batchApp.close();
    }
  });
});
