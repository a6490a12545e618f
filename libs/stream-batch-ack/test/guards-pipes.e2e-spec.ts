import {
  CanActivate,
  Controller,
  ExecutionContext,
  INestMicroservice,
  Injectable,
  PipeTransform,
  UseGuards,
} from '@nestjs/common';
import { Payload, RpcException } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import { RedisStreamsContext, StreamEventPattern } from '@nest-redis-resilience/stream-batch-ack';
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

// Nest guards and pipes run for this transport as for any other: a guard that rejects a payload
// fails the message (not acked; with maxDeliveries 1 it goes to the dead-letter stream), and a
// ValidationPipe-style pipe transforms the payload or rejects it the same way.
const prefix = randomPrefix('guards-pipes');
const GUARDED = `${prefix}guarded`;
const PIPED = `${prefix}piped`;
const GROUP = 'g';

/** Lets only even `n` through; the context it sees is this transport's. */
@Injectable()
class EvenOnlyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const rpc = context.switchToRpc();
    const ctx = rpc.getContext<RedisStreamsContext>();
    if (!(ctx instanceof RedisStreamsContext) || ctx.stream !== GUARDED) return false;
    return rpc.getData<{ n: number }>().n % 2 === 0;
  }
}

class Tick {
  constructor(
    readonly symbol: string,
    readonly price: number,
  ) {}
}

/** Like ValidationPipe with transform: a foreign entry's string fields become a Tick, or the message is rejected. */
class ParseTickPipe implements PipeTransform<Record<string, string>, Tick> {
  transform(value: Record<string, string>): Tick {
    const price = Number(value.price);
    if (typeof value.symbol !== 'string' || !Number.isFinite(price))
      throw new RpcException(`invalid tick: price "${value.price}" is not a number`);
    return new Tick(value.symbol, price);
  }
}

const guardedRuns: number[] = [];
const ticks: unknown[] = [];

@Controller()
class GuardedController {
  @StreamEventPattern(GUARDED)
  @UseGuards(EvenOnlyGuard)
  handle(@Payload() data: { n: number }) {
    guardedRuns.push(data.n);
  }

  @StreamEventPattern(PIPED)
  handleTick(@Payload(new ParseTickPipe()) tick: Tick) {
    ticks.push(tick);
  }
}

describe('Nest guards and pipes on ServerRedisStreams', () => {
  let redis: Redis;
  let app: INestMicroservice;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    ({ app } = await startMicroservice(
      { controllers: [GuardedController], providers: [EvenOnlyGuard] },
      {
        connection: REDIS_URL,
        group: GROUP,
        consumer: 'c1',
        read: { count: 50, blockMs: 50 },
        ack: { batchSize: 100, intervalMs: 20 },
        claim: { minIdleMs: 60_000, intervalMs: 1000 },
        deadLetter: { maxDeliveries: 1 },
      },
    ));
  });

  afterAll(async () => {
    await app.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a guard that rejects: the handler never runs for those messages, they are not acked as handled but dead-lettered; the others run and are acked', async () => {
    const ids = await produce(
      redis,
      GUARDED,
      Array.from({ length: 20 }, (_, n) => ({ n })),
    );
    const dlq = `${GUARDED}:dlq`;
    await waitFor('10 rejected messages dead-lettered', async () => (await redis.xlen(dlq)) === 10);
    await waitFor(
      'pending list empty',
      async () => (await pendingCount(redis, GUARDED, GROUP)) === 0,
    );
    expect(guardedRuns.sort((a, b) => a - b)).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
    const dead = await readAll(redis, dlq);
    expect(dead.map((d) => d.fields.id).sort()).toEqual(ids.filter((_, n) => n % 2 === 1).sort());
    for (const d of dead) {
      expect(d.fields.reason).toBe('handler-failed');
      expect(d.fields.error).toMatch(/Forbidden resource/);
      expect(JSON.parse(JSON.parse(d.fields.fields).data).n % 2).toBe(1);
    }
  });

  it('a ValidationPipe-style pipe: valid payloads reach the handler transformed (a Tick with a numeric price), an invalid one is dead-lettered with the pipe error', async () => {
    await redis.xadd(PIPED, '*', 'symbol', 'BTC', 'price', '101.5');
    const bad = await redis.xadd(PIPED, '*', 'symbol', 'ETH', 'price', 'n/a');
    await redis.xadd(PIPED, '*', 'symbol', 'SOL', 'price', '7');
    const dlq = `${PIPED}:dlq`;
    await waitFor('2 ticks handled', () => ticks.length === 2);
    await waitFor('1 dead-lettered', async () => (await redis.xlen(dlq)) === 1);
    await waitFor(
      'pending list empty',
      async () => (await pendingCount(redis, PIPED, GROUP)) === 0,
    );
    expect(ticks).toEqual([new Tick('BTC', 101.5), new Tick('SOL', 7)]);
    expect(ticks.every((t) => t instanceof Tick)).toBe(true);
    const [dead] = await readAll(redis, dlq);
    expect(dead.fields.id).toBe(bad);
    expect(dead.fields.reason).toBe('handler-failed');
    expect(dead.fields.error).toMatch(/price "n\/a" is not a number/);
  });
});
