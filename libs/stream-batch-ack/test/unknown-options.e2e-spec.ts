import { Module } from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import {
  ClientRedisStreams,
  RedisStreamsClientOptions,
  RedisStreamsServerOptions,
  ServerRedisStreams,
  StreamBatchAckConfigError,
} from '@nest-redis-resilience/stream-batch-ack';

// Nothing here connects: the options are checked when the server or client is created.
const connection = 'redis://127.0.0.1:1';

function errorOf(fn: () => unknown): StreamBatchAckConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(StreamBatchAckConfigError);
    return err as StreamBatchAckConfigError;
  }
  throw new Error('expected a StreamBatchAckConfigError, nothing was thrown');
}

const server = (options: Record<string, unknown>) => () =>
  new ServerRedisStreams({ connection, group: 'g', ...options } as RedisStreamsServerOptions);
const client = (options: Record<string, unknown>) => () =>
  new ClientRedisStreams({ connection, ...options } as RedisStreamsClientOptions);

describe('a misspelt option is refused at creation, naming it and the nearest valid one', () => {
  it('server: deadletter -> deadLetter', () => {
    const err = errorOf(server({ deadletter: { maxDeliveries: 3 } }));
    expect(err.option).toBe('deadletter');
    expect(err.code).toBe('INVALID_OPTIONS');
    expect(err.message).toBe(
      'Invalid option "deadletter": ServerRedisStreams has no such option. Did you mean "deadLetter"?',
    );
  });

  it('client: replyTimeout -> replyTimeoutMs, maxlen -> maxLen; deadletter (a server option) lists the client options', () => {
    const err = errorOf(client({ replyTimeout: 5000 }));
    expect(err.option).toBe('replyTimeout');
    expect(err.message).toContain(
      'ClientRedisStreams has no such option. Did you mean "replyTimeoutMs"?',
    );
    expect(errorOf(client({ maxlen: 10 })).message).toContain('Did you mean "maxLen"?');
    // a server option on a client: nothing near, so the client's options are listed
    const wrong = errorOf(client({ deadletter: { maxDeliveries: 3 } }));
    expect(wrong.option).toBe('deadletter');
    expect(wrong.message).toContain(
      'The options are: connection, maxLen, trimEvery, replyTimeoutMs, replyPrefix, partitions, partitionKey, serializer, deserializer.',
    );
  });

  it.each<[string, Record<string, unknown>, string, string]>([
    ['read', { read: { cout: 10 } }, 'read.cout', 'read.count'],
    ['ack', { ack: { batchsize: 10 } }, 'ack.batchsize', 'ack.batchSize'],
    [
      'ack.backoff',
      { ack: { backoff: { initialMS: 10 } } },
      'ack.backoff.initialMS',
      'ack.backoff.initialMs',
    ],
    ['claim', { claim: { minIdle: 1000 } }, 'claim.minIdle', 'claim.minIdleMs'],
    ['retry', { retry: { maxMS: 100 } }, 'retry.maxMS', 'retry.maxMs'],
    [
      'deadLetter',
      { deadLetter: { maxDelivery: 3 } },
      'deadLetter.maxDelivery',
      'deadLetter.maxDeliveries',
    ],
    ['idempotency', { idempotency: { ttl: 1000 } }, 'idempotency.ttl', 'idempotency.ttlMs'],
    [
      'telemetry',
      { telemetry: { groupInfoInterval: 1 } },
      'telemetry.groupInfoInterval',
      'telemetry.groupInfoIntervalMs',
    ],
    [
      'partitions',
      { partitions: { ticks: { cont: 2 } } },
      'partitions.ticks.cont',
      'partitions.ticks.count',
    ],
    [
      'a Cluster connection',
      { connection: { cluster: [{ port: 1 }], clusterOption: {} } },
      'connection.clusterOption',
      'connection.clusterOptions',
    ],
    ['the top level', { idempotence: { store: 'memory' } }, 'idempotence', 'idempotency'],
  ])('server, %s', (_level, options, option, suggestion) => {
    const err = errorOf(server(options));
    expect(err.option).toBe(option);
    expect(err.message).toContain(`has no such option. Did you mean "${suggestion}"?`);
  });

  it('nothing near: the valid names of that level are listed', () => {
    const err = errorOf(server({ read: { timeoutMs: 5 } }));
    expect(err.option).toBe('read.timeoutMs');
    expect(err.message).toContain('The options of "read" are: count, blockMs.');
  });

  it('the name is checked before the values', () => {
    expect(errorOf(server({ deadletter: {}, read: { count: 0 } })).option).toBe('deadletter');
  });
});

describe('every documented option is accepted', () => {
  it('server: all options at once', () => {
    const all: Required<RedisStreamsServerOptions> = {
      connection: { cluster: [{ host: '127.0.0.1', port: 1 }], clusterOptions: {} },
      group: 'g',
      streams: { orders: 'app:orders' },
      consumer: 'c',
      startId: '$',
      read: { count: 10, blockMs: 10 },
      ack: {
        batchSize: 10,
        intervalMs: 10,
        maxPending: 100,
        backoff: { initialMs: 10, maxMs: 100, factor: 2, jitter: 0.1 },
      },
      claim: { minIdleMs: 10_000, intervalMs: 1000, count: 10 },
      retry: { initialMs: 10, maxMs: 1000, factor: 2, jitter: 0.1 },
      deadLetter: { maxDeliveries: 3, stream: (s) => `${s}:dead`, maxLen: 100 },
      idempotency: {
        store: 'redis',
        redis: 'redis://127.0.0.1:1',
        keyPrefix: 'x:',
        ttlMs: 1000,
        lockMs: 1000,
        maxSize: 10,
      },
      concurrency: 10,
      shutdownTimeoutMs: 1000,
      serializer: { serialize: (v: unknown) => v },
      deserializer: { deserialize: (v: unknown) => v },
      replyPrefix: 'app:reply:',
      partitions: { ticks: 2, trades: { count: 3 } },
      ordering: 'none',
      leaseMs: 3000,
      telemetry: { groupInfoIntervalMs: 1000 },
      eventEmitter: { emit: () => true },
    };
    expect(() => new ServerRedisStreams(all)).not.toThrow();
    expect(
      () => new ServerRedisStreams({ ...all, connection: { host: 'h', port: 1, db: 2 } }),
    ).not.toThrow();
  });

  it('client: all options at once', () => {
    const all: Required<RedisStreamsClientOptions> = {
      connection: { host: '127.0.0.1', port: 1, keyPrefix: 'ignored-by-streams:' },
      maxLen: 100,
      trimEvery: 10,
      replyTimeoutMs: 1000,
      replyPrefix: 'app:reply:',
      partitions: { ticks: 2 },
      partitionKey: () => undefined,
      serializer: { serialize: (v: unknown) => v },
      deserializer: { deserialize: (v: unknown) => v },
    };
    expect(() => new ClientRedisStreams(all)).not.toThrow();
  });

  it('client through ClientsModule.register (Nest passes `options` as given): accepted, and a typo refused', async () => {
    @Module({
      imports: [
        ClientsModule.register([
          {
            name: 'GOOD',
            customClass: ClientRedisStreams,
            options: { connection, maxLen: 100, replyTimeoutMs: 5000 },
          },
        ]),
      ],
    })
    class GoodModule {}
    const moduleRef = await Test.createTestingModule({ imports: [GoodModule] }).compile();
    expect(moduleRef.get('GOOD')).toBeInstanceOf(ClientRedisStreams);
    await moduleRef.close();

    expect(() =>
      ClientsModule.register([
        { name: 'BAD', customClass: ClientRedisStreams, options: { connection, maxlen: 100 } },
      ]),
    ).toThrow(
      'Invalid option "maxlen": ClientRedisStreams has no such option. Did you mean "maxLen"?',
    );
  });
});
