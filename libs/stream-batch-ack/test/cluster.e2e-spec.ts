import { Controller, INestMicroservice } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { Cluster } from 'ioredis';
import { keySlot } from '../src/redis/keys';
import { RedisStreamsContext, ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
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
  @EventPattern(A1)
  a1(@Payload() _d: unknown, @Ctx() ctx: RedisStreamsContext) {
    this.count(ctx);
  }
  @EventPattern(A2)
  a2(@Payload() _d: unknown, @Ctx() ctx: RedisStreamsContext) {
    this.count(ctx);
  }
  @EventPattern(B)
  b(@Payload() data: { fail?: boolean }, @Ctx() ctx: RedisStreamsContext) {
    this.count(ctx);
    if (data.fail) throw new Error('poison');
  }
  private count(ctx: RedisStreamsContext) {
    const key = `${ctx.stream} ${ctx.id}`;
    handled.set(key, (handled.get(key) ?? 0) + 1);
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
      @EventPattern('sba-untagged-stream')
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
});
