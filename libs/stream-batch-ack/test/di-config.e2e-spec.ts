import {
  Controller,
  Get,
  INestApplication,
  INestMicroservice,
  LoggerService,
  Module,
  Type,
} from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { NestFactory } from '@nestjs/core';
import {
  AsyncMicroserviceOptions,
  ClientProxy,
  ClientsModule,
  Ctx,
  Payload,
} from '@nestjs/microservices';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import request from 'supertest';
import {
  ClientRedisStreams,
  partitionStreams,
  RedisStreamsContext,
  RedisStreamsServerModule,
  ServerRedisStreams,
  StreamBatchAckConfigError,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import {
  RedisStreamsHealthIndicator,
  RedisStreamsHealthModule,
} from '@nest-redis-resilience/stream-batch-ack/health';
import { deleteKeys, pendingCount, randomPrefix, REDIS_URL, waitFor } from './support/helpers';

/**
 * The server configured through DI: its connection, group and consumer come from ConfigService
 * (RedisStreamsServerModule.forRootAsync), the producer is a ClientsModule.registerAsync client,
 * and the health indicator checks the server's streams without being told them. Both documented
 * ways to start it: a hybrid app (connectMicroservice) and a standalone microservice
 * (createMicroservice with the strategy injected from the app's container).
 */
const prefix = randomPrefix('di');

/** The connection URL with a client name, so that CLIENT LIST tells whose connections are open. */
function named(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set('connectionName', name);
  return u.toString();
}

async function connectionsNamed(redis: Redis, name: string): Promise<number> {
  const list = (await redis.call('CLIENT', 'LIST')) as string;
  return list.split('\n').filter((line) => line.includes(` name=${name} `)).length;
}

/** Nest's logger for the app: keeps what is logged as an error or a warning. */
class RecordingLogger implements LoggerService {
  readonly errors: string[] = [];
  readonly warnings: string[] = [];
  log(): void {}
  debug(): void {}
  verbose(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
  error(message: unknown): void {
    this.errors.push(message instanceof Error ? message.message : String(message));
  }
  fatal(message: unknown): void {
    this.error(message);
  }
}

interface Handled {
  stream: string;
  logicalStream: string;
  group: string;
  consumer: string;
  data: unknown;
}

/**
 * A consumer app whose settings come only from ConfigService: streams `orders` and `ticks`
 * (partitioned in 2), a ClientsModule.registerAsync producer, and GET /health.
 */
function consumerApp(tag: string) {
  const orders = `${prefix}${tag}:orders`;
  const ticks = `${prefix}${tag}:ticks`;
  const settings = {
    redis: { url: named(REDIS_URL, `${prefix}${tag}:server`) },
    producer: { url: named(REDIS_URL, `${prefix}${tag}:producer`) },
    orders: { group: `${tag}-billing`, consumer: `${tag}-c1` },
  };
  const handled: Handled[] = [];

  @Controller()
  class ConsumerController {
    @StreamEventPattern(orders)
    onOrder(@Payload() order: unknown, @Ctx() ctx: RedisStreamsContext) {
      handled.push({
        stream: ctx.stream,
        logicalStream: ctx.logicalStream,
        group: ctx.group,
        consumer: ctx.consumer,
        data: order,
      });
    }

    @StreamEventPattern(ticks)
    onTick(@Payload() tick: unknown, @Ctx() ctx: RedisStreamsContext) {
      handled.push({
        stream: ctx.stream,
        logicalStream: ctx.logicalStream,
        group: ctx.group,
        consumer: ctx.consumer,
        data: tick,
      });
    }
  }

  @Controller('health')
  class HealthController {
    constructor(
      private readonly health: HealthCheckService,
      private readonly streams: RedisStreamsHealthIndicator,
    ) {}

    @Get()
    @HealthCheck()
    check() {
      return this.health.check([() => this.streams.isHealthy('streams', { maxPending: 1000 })]);
    }
  }

  @Module({
    imports: [
      ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => settings] }),
      RedisStreamsServerModule.forRootAsync({
        imports: [ConfigModule],
        inject: [ConfigService],
        useFactory: (config: ConfigService) => ({
          connection: config.getOrThrow<string>('redis.url'),
          group: config.getOrThrow<string>('orders.group'),
          consumer: config.getOrThrow<string>('orders.consumer'),
          read: { count: 50, blockMs: 50 },
          ack: { batchSize: 100, intervalMs: 20 },
          partitions: { [ticks]: 2 },
        }),
      }),
      ClientsModule.registerAsync([
        {
          name: 'ORDERS',
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (config: ConfigService) => ({
            customClass: ClientRedisStreams,
            options: {
              connection: config.getOrThrow<string>('producer.url'),
              partitions: { [ticks]: 2 },
            },
          }),
        },
      ]),
      TerminusModule,
      RedisStreamsHealthModule,
    ],
    controllers: [ConsumerController, HealthController],
  })
  class ConsumerAppModule {}

  return { module: ConsumerAppModule, orders, ticks, settings, handled };
}

type ConsumerApp = ReturnType<typeof consumerApp>;

/**
 * Emits one order and two ticks (one per partition, round robin) through the registerAsync
 * client; waits until all three are handled and acknowledged.
 */
async function roundTrip(redis: Redis, producer: ClientProxy, app: ConsumerApp) {
  const orderId = await lastValueFrom(producer.emit<string>(app.orders, { orderId: 'o-1' }));
  await lastValueFrom(producer.emit(app.ticks, { symbol: 'BTC', price: 1 }));
  await lastValueFrom(producer.emit(app.ticks, { symbol: 'ETH', price: 2 }));
  await waitFor('the order and both ticks handled', () => app.handled.length === 3, 20_000);
  const partitions = partitionStreams(app.ticks, 2);
  await waitFor(
    'all three acknowledged',
    async () => {
      const group = app.settings.orders.group;
      const counts = await Promise.all(
        [app.orders, ...partitions].map((s) => pendingCount(redis, s, group)),
      );
      return counts.every((n) => n === 0);
    },
    20_000,
  );
  return { orderId, partitions };
}

/** What the server's handlers saw: group and consumer from ConfigService, each stream read. */
function expectHandledFromConfig(app: ConsumerApp, partitions: string[]) {
  const { group, consumer } = app.settings.orders;
  expect(app.handled.every((h) => h.group === group && h.consumer === consumer)).toBe(true);
  expect(app.handled.find((h) => h.stream === app.orders)?.data).toEqual({ orderId: 'o-1' });
  const tickStreams = app.handled.filter((h) => h.logicalStream === app.ticks).map((h) => h.stream);
  expect(tickStreams.sort()).toEqual([...partitions].sort());
}

/** The short form: every stream the server reads, in its group, with nothing repeated. */
async function expectHealthOfServerStreams(
  health: RedisStreamsHealthIndicator,
  app: ConsumerApp,
  orderId: string,
  partitions: string[],
) {
  const result = await health.isHealthy('streams', { maxPending: 0, maxLag: 0 });
  const { streams, ...summary } = result.streams;
  expect(summary).toEqual({
    status: 'up',
    group: app.settings.orders.group,
    pending: 0,
    lag: 0,
  });
  expect(
    [...(streams as { stream: string }[])].sort((a, b) => a.stream.localeCompare(b.stream)),
  ).toEqual([
    { stream: app.orders, consumers: 1, pending: 0, lag: 0, lastDeliveredId: orderId },
    {
      stream: app.ticks,
      consumers: 1,
      pending: 0,
      lag: 0,
      // Ordered partitions: the one consumer owns them all.
      owned: partitions.map((_, partition) => partition),
      partitions: partitions.map((stream, partition) => ({
        partition,
        stream,
        consumers: 1,
        pending: 0,
        lag: 0,
        lastDeliveredId: expect.stringMatching(/^\d+-\d+$/),
      })),
    },
  ]);
}

/**
 * app.close(): the server shuts down once (one QUIT of its command connection, although both
 * Nest and the module call close()), and neither its connections nor the producer's stay open.
 */
async function closeAndExpectNothingOpen(
  redis: Redis,
  close: () => Promise<void>,
  server: ServerRedisStreams,
  app: ConsumerApp,
  logger: RecordingLogger,
) {
  const [reader, commands] = server.unwrap<[Redis, Redis]>();
  const quit = jest.spyOn(commands, 'quit');
  const closeCalls = jest.spyOn(server, 'close');
  await close();
  expect(closeCalls.mock.calls.length).toBeGreaterThanOrEqual(2); // Nest's, then the module's
  expect(quit).toHaveBeenCalledTimes(1);
  await waitFor(
    "the server's reader and command connections ended",
    () => reader.status === 'end' && commands.status === 'end',
    10_000,
  );
  const names = [app.settings.redis.url, app.settings.producer.url].map((url) =>
    new URL(url).searchParams.get('connectionName')!,
  );
  await waitFor(
    'no connection of the server or the producer left on Redis',
    async () =>
      (await Promise.all(names.map((n) => connectionsNamed(redis, n)))).every((n) => n === 0),
    10_000,
  );
  expect(logger.errors).toEqual([]);
}

describe('ServerRedisStreams configured through DI (RedisStreamsServerModule.forRootAsync + ConfigService)', () => {
  jest.setTimeout(60_000);
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(REDIS_URL);
    await redis.ping();
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  describe('a hybrid app: connectMicroservice({ strategy: app.get(ServerRedisStreams) })', () => {
    const consumer = consumerApp('hybrid');
    const logger = new RecordingLogger();
    let app: INestApplication | undefined;

    afterAll(async () => {
      await app?.close();
    });

    it('consumes with the connection and group from ConfigService, reports its streams in /health, and closes everything', async () => {
      app = await NestFactory.create(consumer.module, { logger, abortOnError: false });
      const server = app.get(ServerRedisStreams);
      expect(server.options.connection).toBe(consumer.settings.redis.url);
      expect(server.options.group).toBe(consumer.settings.orders.group);
      app.connectMicroservice({ strategy: server }, { inheritAppConfig: true });
      await app.startAllMicroservices();
      await app.init();
      expect([...server.streams].sort()).toEqual([consumer.orders, consumer.ticks]);
      expect(await connectionsNamed(redis, `${prefix}hybrid:server`)).toBe(2); // reader + commands

      const { orderId, partitions } = await roundTrip(
        redis,
        app.get<ClientProxy>('ORDERS'),
        consumer,
      );
      expectHandledFromConfig(consumer, partitions);
      await expectHealthOfServerStreams(
        app.get(RedisStreamsHealthIndicator),
        consumer,
        orderId,
        partitions,
      );
      const res = await request(app.getHttpServer()).get('/health').expect(200);
      expect(res.body.info.streams).toMatchObject({
        status: 'up',
        group: consumer.settings.orders.group,
        pending: 0,
      });

      const closing = app;
      app = undefined;
      await closeAndExpectNothingOpen(redis, () => closing.close(), server, consumer, logger);
    });
  });

  describe('a standalone microservice: createMicroservice(AppModule, { inject: [ServerRedisStreams], useFactory })', () => {
    const consumer = consumerApp('standalone');
    const logger = new RecordingLogger();
    let app: INestMicroservice | undefined;

    afterAll(async () => {
      await app?.close();
    });

    it('takes the strategy from its own container, consumes, reports health, and closes everything', async () => {
      app = await NestFactory.createMicroservice<AsyncMicroserviceOptions>(consumer.module, {
        logger,
        abortOnError: false,
        inject: [ServerRedisStreams],
        useFactory: (server: ServerRedisStreams) => ({ strategy: server }),
      });
      await app.listen();
      const server = app.get(ServerRedisStreams);
      expect(server.options.group).toBe(consumer.settings.orders.group);
      expect(await connectionsNamed(redis, `${prefix}standalone:server`)).toBe(2);

      const { orderId, partitions } = await roundTrip(
        redis,
        app.get<ClientProxy>('ORDERS'),
        consumer,
      );
      expectHandledFromConfig(consumer, partitions);
      await expectHealthOfServerStreams(
        app.get(RedisStreamsHealthIndicator),
        consumer,
        orderId,
        partitions,
      );

      const closing = app;
      app = undefined;
      await closeAndExpectNothingOpen(redis, () => closing.close(), server, consumer, logger);
    });
  });

  describe('RedisStreamsServerModule.forRoot, the server started by hand (not given to Nest)', () => {
    it('the health short form says it reads no stream, and app.close() still closes its connections', async () => {
      const name = `${prefix}by-hand:server`;
      @Module({
        imports: [
          RedisStreamsServerModule.forRoot({
            connection: named(REDIS_URL, name),
            group: 'by-hand',
            read: { blockMs: 50 },
          }),
          RedisStreamsHealthModule,
        ],
      })
      class ByHandModule {}
      const logger = new RecordingLogger();
      const ctx = await NestFactory.createApplicationContext(ByHandModule, {
        logger,
        abortOnError: false,
      });
      try {
        const server = ctx.get(ServerRedisStreams);
        await new Promise<void>((resolve, reject) =>
          server.listen((err?: unknown) => (err ? reject(err) : resolve())),
        );
        expect(await connectionsNamed(redis, name)).toBe(2);
        const health = await ctx.get(RedisStreamsHealthIndicator).isHealthy('streams');
        expect(health.streams).toEqual({
          status: 'down',
          group: 'by-hand',
          message:
            'ServerRedisStreams reads no stream: no @EventPattern or @MessagePattern handler is registered on it.',
        });
      } finally {
        await ctx.close();
      }
      await waitFor(
        'its connections closed',
        async () => (await connectionsNamed(redis, name)) === 0,
        10_000,
      );
      expect(logger.errors).toEqual([]);
    });
  });

  describe('a misconfigured factory fails at start-up, naming the problem', () => {
    const config = ConfigModule.forRoot({
      ignoreEnvFile: true,
      load: [() => ({ redis: { url: REDIS_URL }, orders: { group: 'g' } })],
    });

    function appWith(useFactory: (config: ConfigService) => unknown): Type {
      @Module({
        imports: [
          config,
          RedisStreamsServerModule.forRootAsync({
            imports: [ConfigModule],
            inject: [ConfigService],
            useFactory: useFactory as (config: ConfigService) => never,
          }),
        ],
      })
      class MisconfiguredModule {}
      return MisconfiguredModule;
    }

    const create = {
      hybrid: (module: Type) => NestFactory.create(module, { logger: false, abortOnError: false }),
      standalone: (module: Type) =>
        NestFactory.createMicroservice<AsyncMicroserviceOptions>(module, {
          logger: false,
          abortOnError: false,
          inject: [ServerRedisStreams],
          useFactory: (server: ServerRedisStreams) => ({ strategy: server }),
        }),
    };

    it.each(['hybrid', 'standalone'] as const)(
      '%s: an unknown option name is refused with the nearest valid one',
      async (kind) => {
        const module = appWith((c) => ({
          connection: c.getOrThrow<string>('redis.url'),
          group: c.getOrThrow<string>('orders.group'),
          deadletter: { maxDeliveries: 3 },
        }));
        const err = await create[kind](module).then(
          () => new Error('expected the app to fail at start-up'),
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(StreamBatchAckConfigError);
        expect((err as StreamBatchAckConfigError).option).toBe('deadletter');
        expect((err as Error).message).toBe(
          'Invalid option "deadletter": ServerRedisStreams has no such option. Did you mean "deadLetter"?',
        );
      },
    );

    it('a missing setting: the error of ConfigService names the key', async () => {
      const module = appWith((c) => ({
        connection: c.getOrThrow<string>('redis.uri'),
        group: 'g',
      }));
      await expect(create.hybrid(module)).rejects.toThrow('"redis.uri"');
    });

    it('a factory that returns nothing: the module says what it needs', async () => {
      const module = appWith(() => undefined);
      await expect(create.hybrid(module)).rejects.toThrow(
        'Invalid option "options": RedisStreamsServerModule needs the ServerRedisStreams options ({ connection, group, ... }); forRootAsync\'s factory returned undefined.',
      );
    });

    it('a value the server refuses (no group): named', async () => {
      const module = appWith((c) => ({ connection: c.getOrThrow<string>('redis.url') }));
      await expect(create.hybrid(module)).rejects.toThrow(
        'Invalid option "group": give the consumer group name (a non-empty string).',
      );
    });

    it('a ClientsModule.registerAsync client with a misspelt option is refused the same way', async () => {
      @Module({
        imports: [
          config,
          ClientsModule.registerAsync([
            {
              name: 'ORDERS',
              imports: [ConfigModule],
              inject: [ConfigService],
              useFactory: (c: ConfigService) => ({
                customClass: ClientRedisStreams,
                options: { connection: c.getOrThrow<string>('redis.url'), maxlen: 100 },
              }),
            },
          ]),
        ],
      })
      class BadProducerModule {}
      await expect(create.hybrid(BadProducerModule)).rejects.toThrow(
        'Invalid option "maxlen": ClientRedisStreams has no such option. Did you mean "maxLen"?',
      );
    });
  });
});
