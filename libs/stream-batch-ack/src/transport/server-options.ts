import { hostname } from 'node:os';
import type { BackoffOptions } from '../core/backoff';
import { StreamBatchAckConfigError } from '../core/errors';
import type { TransportIdempotencyOptions } from '../idempotency/idempotency.options';
import {
  checkFunction,
  checkGiven,
  checkNonEmptyString,
  checkOneOf,
  checkPlainObject,
  checkRatio,
} from '@nest-redis-resilience/common';
import { resolvePartitions } from '../partitions/partition-layout';
import { defaultDeadLetterStream } from '../redis/keys';
import {
  checkConnection,
  checkOptionNames,
  failValue,
  int,
  num,
  OptionNames,
  replyPrefix,
} from './option-checks';
import { RedisStreamsServerOptions, ResolvedServerOptions } from './redis-streams.options';

type ServerGroup<K extends keyof RedisStreamsServerOptions> = OptionNames<
  NonNullable<RedisStreamsServerOptions[K]>
>;

const BACKOFF: OptionNames<BackoffOptions> = {
  initialMs: true,
  maxMs: true,
  factor: true,
  jitter: true,
};
const IDEMPOTENCY: OptionNames<TransportIdempotencyOptions> = {
  store: true,
  redis: true,
  keyPrefix: true,
  ttlMs: true,
  lockMs: true,
  maxSize: true,
};
const SERVER_OPTIONS: OptionNames<RedisStreamsServerOptions> = {
  connection: true,
  group: true,
  streams: true,
  consumer: true,
  startId: true,
  read: { count: true, blockMs: true } satisfies ServerGroup<'read'>,
  ack: {
    batchSize: true,
    intervalMs: true,
    maxPending: true,
    backoff: BACKOFF,
  } satisfies ServerGroup<'ack'>,
  claim: { minIdleMs: true, intervalMs: true, count: true } satisfies ServerGroup<'claim'>,
  retry: BACKOFF,
  deadLetter: {
    maxDeliveries: true,
    stream: true,
    maxLen: true,
  } satisfies ServerGroup<'deadLetter'>,
  idempotency: IDEMPOTENCY,
  concurrency: true,
  shutdownTimeoutMs: true,
  serializer: true,
  deserializer: true,
  replyPrefix: true,
  partitions: true,
  ordering: true,
  leaseMs: true,
  telemetry: { groupInfoIntervalMs: true } satisfies ServerGroup<'telemetry'>,
  eventEmitter: true,
};

/** Fills in the defaults and rejects invalid options with an error that names the option. */
export function resolveServerOptions(options: RedisStreamsServerOptions): ResolvedServerOptions {
  if (!options || typeof options !== 'object')
    throw new StreamBatchAckConfigError('options', 'ServerRedisStreams needs an options object.');
  checkOptionNames('ServerRedisStreams', options, SERVER_OPTIONS);
  checkConnection(options.connection);
  const group = 'give the consumer group name (a non-empty string)';
  checkGiven('group', options.group, failValue, group);
  checkNonEmptyString('group', options.group, failValue, group);
  const resolved: ResolvedServerOptions = {
    connection: options.connection,
    group: options.group,
    streams: streamsOption(options.streams),
    consumer: options.consumer ?? `${hostname()}-${process.pid}`,
    startId: options.startId ?? '0',
    read: {
      count: int('read.count', options.read?.count, 500, 1),
      blockMs: int('read.blockMs', options.read?.blockMs, 100, 1),
    },
    ack: {
      batchSize: int('ack.batchSize', options.ack?.batchSize, 500, 1),
      intervalMs: int('ack.intervalMs', options.ack?.intervalMs, 50, 0),
      maxPending: int('ack.maxPending', options.ack?.maxPending, 50_000, 1),
      backoff: options.ack?.backoff,
    },
    claim: {
      minIdleMs: int('claim.minIdleMs', options.claim?.minIdleMs, 30_000, 1),
      intervalMs: int('claim.intervalMs', options.claim?.intervalMs, 5_000, 1),
      count: int('claim.count', options.claim?.count, 100, 1),
    },
    retry: {
      initialMs: int('retry.initialMs', options.retry?.initialMs, 1000, 0),
      maxMs: 0,
      factor: num('retry.factor', options.retry?.factor, 2, 1),
      jitter: num('retry.jitter', options.retry?.jitter, 0.2, 0),
    },
    deadLetter: {
      maxDeliveries: int('deadLetter.maxDeliveries', options.deadLetter?.maxDeliveries, 5, 1),
      stream: options.deadLetter?.stream ?? defaultDeadLetterStream,
      maxLen: int('deadLetter.maxLen', options.deadLetter?.maxLen, 0, 0),
    },
    idempotency: options.idempotency,
    concurrency: int('concurrency', options.concurrency, 1000, 1),
    shutdownTimeoutMs: int('shutdownTimeoutMs', options.shutdownTimeoutMs, 10_000, 0),
    replyPrefix: replyPrefix(options.replyPrefix),
    partitions: resolvePartitions(options.partitions),
    ordering: ordering(options.ordering),
    leaseMs: int('leaseMs', options.leaseMs, 5000, 30),
    telemetry: {
      groupInfoIntervalMs: int(
        'telemetry.groupInfoIntervalMs',
        options.telemetry?.groupInfoIntervalMs,
        5000,
        0,
      ),
    },
  };
  if (
    options.eventEmitter !== undefined &&
    typeof (options.eventEmitter as { emit?: unknown } | null)?.emit !== 'function'
  )
    throw new StreamBatchAckConfigError(
      'eventEmitter',
      'must have an emit(event, payload) method (EventEmitter2 of @nestjs/event-emitter: app.get(EventEmitter2)).',
    );
  const { claim, retry } = resolved;
  retry.maxMs = int(
    'retry.maxMs',
    options.retry?.maxMs,
    Math.min(15_000, Math.floor(claim.minIdleMs / 2)),
    0,
  );
  checkRatio('retry.jitter', retry.jitter, failValue);
  if (retry.maxMs * (1 + retry.jitter) >= claim.minIdleMs)
    throw new StreamBatchAckConfigError(
      'retry.maxMs',
      `the longest retry delay (${retry.maxMs} ms, +${retry.jitter * 100} % jitter) must stay below claim.minIdleMs (${claim.minIdleMs} ms), or other consumers take a waiting entry over.`,
    );
  checkFunction(
    'deadLetter.stream',
    resolved.deadLetter.stream,
    failValue,
    'must be a function (stream) => name',
  );
  const idem = options.idempotency;
  if (idem !== undefined) {
    checkOneOf('idempotency.store', idem.store, ['memory', 'redis'], failValue);
    int('idempotency.ttlMs', idem.ttlMs, 1, 1);
    int('idempotency.lockMs', idem.lockMs, 1, 1);
    int('idempotency.maxSize', idem.maxSize, 1, 1);
  }
  return resolved;
}

function streamsOption(value: unknown): ReadonlyMap<string, string> {
  if (value === undefined) return new Map();
  checkPlainObject(
    'streams',
    value,
    failValue,
    (got) => `must be an object of pattern -> stream name ({ ticks: 'prod:ticks' }), got ${got}`,
  );
  const map = new Map<string, string>();
  const patternOf = new Map<string, string>();
  for (const [pattern, stream] of Object.entries(value as Record<string, string>)) {
    const streamName = (got: string) => `must be a stream name (a non-empty string), got ${got}`;
    checkGiven(`streams.${pattern}`, stream, failValue, streamName);
    checkNonEmptyString(`streams.${pattern}`, stream, failValue, streamName);
    const other = patternOf.get(stream);
    if (other !== undefined)
      throw new StreamBatchAckConfigError(
        `streams.${pattern}`,
        `names the stream "${stream}" of the pattern "${other}" too: one handler per stream.`,
      );
    patternOf.set(stream, pattern);
    if (stream !== pattern) map.set(pattern, stream);
  }
  return map;
}

function ordering(value: 'key' | 'none' | undefined): 'key' | 'none' {
  checkOneOf(
    'ordering',
    value,
    ['key', 'none'],
    failValue,
    (got) => `must be 'key' (one owner per partition, each key in order) or 'none', got ${got}`,
  );
  return value ?? 'key';
}
