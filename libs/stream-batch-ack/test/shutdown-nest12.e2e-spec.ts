import {
  Controller,
  Get,
  INestApplication,
  Injectable,
  Module,
  OnApplicationShutdown,
  OnModuleDestroy,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Ctx, Payload } from '@nestjs/microservices';
import { Redis } from 'ioredis';
import {
  RedisStreamsContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  deleteKeys,
  pendingCount,
  produce,
  randomPrefix,
  REDIS_URL,
  sleep,
  waitFor,
} from './support/helpers';

/*
 * A hybrid app on NestJS 12: app.close() runs every onModuleDestroy hook (module by module, the
 * root first, then the modules it imports, deeper and deeper), then beforeApplicationShutdown,
 * then closes the HTTP server and the connected microservices, then onApplicationShutdown. The
 * transport must still stop reading first, let the handlers in flight finish while the providers
 * they use are alive, flush every ack, and close its connections.
 */

jest.setTimeout(60_000);

const prefix = randomPrefix('shutdown-nest12');
const STREAM = `${prefix}jobs`;
const AUDIT = `${prefix}audit`;
const GROUP = 'workers';
const IN_FLIGHT = 20;

/** What happened, in order: handlers, lifecycle hooks, the server's close. */
const timeline: string[] = [];
const started: string[] = [];
const handled: string[] = [];
const failures: string[] = [];
let release!: () => void;
const gate = new Promise<void>((resolve) => (release = resolve));

/** A provider of a nested module with its own Redis connection, used by the handlers. */
@Injectable()
class AuditLog implements OnModuleDestroy, OnApplicationShutdown {
  readonly redis = new Redis(REDIS_URL);
  private closed = false;
  /** The entry the hook writes to the stream after the app began closing. */
  lateId: string | undefined;

  async record(id: string): Promise<void> {
    if (this.closed) throw new Error(`AuditLog used after its onModuleDestroy (entry ${id})`);
    await this.redis.rpush(AUDIT, id);
  }

  /** Uses Redis at shutdown: writes a last entry to the stream, then accepts no more records. */
  async onModuleDestroy(): Promise<void> {
    timeline.push(`AuditLog.onModuleDestroy (handled: ${handled.length})`);
    this.lateId = (await this.redis.xadd(STREAM, '*', 'data', '{"late":true}')) ?? undefined;
    this.closed = true;
  }

  async onApplicationShutdown(): Promise<void> {
    timeline.push('AuditLog.onApplicationShutdown');
    await this.redis.quit();
  }
}

@Module({ providers: [AuditLog], exports: [AuditLog] })
class AuditModule {}

@Controller()
class JobsController {
  constructor(private readonly audit: AuditLog) {}

  @StreamEventPattern(STREAM)
  async handle(@Payload() _job: unknown, @Ctx() ctx: RedisStreamsContext) {
    started.push(ctx.id);
    await gate; // in flight when app.close() is called
    await sleep(10 + Math.floor(Math.random() * 40));
    try {
      await this.audit.record(ctx.id);
    } catch (err) {
      failures.push(String(err));
      throw err;
    }
    handled.push(ctx.id);
  }
}

@Module({ imports: [AuditModule], controllers: [JobsController] })
class JobsModule {}

@Controller('ping')
class PingController {
  @Get()
  ping() {
    return { ok: true };
  }
}

describe('NestJS 12 hybrid app: app.close() with slow handlers in flight', () => {
  let redis: Redis;
  let server: ServerRedisStreams;
  let app: INestApplication | undefined;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
  });

  afterAll(async () => {
    release();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('stops reading, lets the handlers finish while their providers live, acks all, then closes every connection', async () => {
    server = new ServerRedisStreams({
      connection: REDIS_URL,
      group: GROUP,
      consumer: 'c1',
      read: { count: 100, blockMs: 50 },
      ack: { batchSize: 1000, intervalMs: 60_000 }, // acks wait in the batcher: close() flushes them
      claim: { minIdleMs: 60_000, intervalMs: 60_000 },
      concurrency: IN_FLIGHT, // the 20 in flight fill it: nothing more is read before close
      shutdownTimeoutMs: 20_000,
    });
    // The server is a provider of the root module (as for the health check): its own
    // onModuleDestroy runs before the hooks of the modules the root imports.
    @Module({
      imports: [JobsModule],
      controllers: [PingController],
      providers: [{ provide: ServerRedisStreams, useValue: server }],
    })
    class AppModule {}

    app = await NestFactory.create(AppModule, { logger: false });
    app.connectMicroservice({ strategy: server }, { inheritAppConfig: true });
    await app.startAllMicroservices();
    await app.listen(0, '127.0.0.1');
    const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    expect((await fetch(`${url}/ping`)).status).toBe(200);
    const audit = app.get(AuditLog);
    const [reader, commands] = server.unwrap<[Redis, Redis]>();

    const inFlight = await produce(
      redis,
      STREAM,
      Array.from({ length: IN_FLIGHT }, (_, n) => ({ n })),
    );
    await waitFor(`${IN_FLIGHT} handlers in flight`, () => started.length === IN_FLIGHT);

    const closing = app.close();
    timeline.push('app.close() called');
    // Written after the app began closing: not for this consumer any more.
    const afterClose = await produce(redis, STREAM, [{ after: 1 }, { after: 2 }, { after: 3 }]);
    release();
    await closing;
    app = undefined;
    timeline.push('app.close() resolved');

    // Every message in flight was handled, through the provider, before it was destroyed.
    expect(failures).toEqual([]);
    expect([...handled].sort()).toEqual([...inFlight].sort());
    expect((await redis.lrange(AUDIT, 0, -1)).sort()).toEqual([...inFlight].sort());
    expect(timeline).toContain(`AuditLog.onModuleDestroy (handled: ${IN_FLIGHT})`);
    // ...and acknowledged: nothing of the group is pending.
    expect(server.pendingAcks).toBe(0);
    expect(await pendingCount(redis, STREAM, GROUP)).toBe(0);
    // No entry was read after the close began: neither those written then nor the hook's.
    expect(audit.lateId).toBeDefined();
    expect(started).toEqual(expect.not.arrayContaining([...afterClose, audit.lateId]));
    expect(started).toHaveLength(IN_FLIGHT);
    const [info] = (await redis.call('XINFO', 'GROUPS', STREAM)) as unknown[][];
    const group = Object.fromEntries(
      Array.from({ length: info.length / 2 }, (_, i) => [info[2 * i], info[2 * i + 1]]),
    );
    expect(group['last-delivered-id']).toBe(inFlight[inFlight.length - 1]);
    expect(group.lag).toBe(afterClose.length + 1);
    // Every connection is closed (and jest exits without --forceExit).
    expect(reader.status).toBe('end');
    expect(commands.status).toBe('end');
    expect(audit.redis.status).toBe('end');
    await expect(fetch(`${url}/ping`)).rejects.toThrow();
    expect(timeline.at(-2)).toBe('AuditLog.onApplicationShutdown');
  });
});
