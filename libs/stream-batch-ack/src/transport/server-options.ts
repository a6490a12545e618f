import { hostname } from 'node:os';
import type { BackoffOptions } from '../core/backoff';
import { DEFAULT_REPLY_PREFIX } from '../core/entry-codec';
import { StreamBatchAckConfigError } from '../core/errors';
import { nearestName } from '../core/nearest-name';
import type { TransportIdempotencyOptions } from '../idempotency/idempotency.options';
import { isClusterConnection, type RedisStreamsClusterConnection } from '../redis/connection';
import { PartitionsOption, resolvePartitions } from '../partitions/partition-layout';
import { defaultDeadLetterStream } from '../redis/keys';
import {
  RedisStreamsClientOptions,
  RedisStreamsServerOptions,
  ResolvedServerOptions,
} from './redis-streams.options';

/**
 * The option names of an options object: `true` for a leaf (or a value not looked into, such as
 * ioredis options), a nested object for a group of options whose names are fixed too. Each level
 * is typed against its options interface, so an option added there must be listed here.
 */
type OptionTree = { [name: string]: true | OptionTree };
type OptionNames<T> = Record<keyof Required<T>, true | OptionTree>;
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
  telemetry: { groupInfoIntervalMs: true } satisfies ServerGroup<'telemetry'>,
  eventEmitter: true,
};
const CLIENT_OPTIONS: OptionNames<RedisStreamsClientOptions> = {
  connection: true,
  maxLen: true,
  trimEvery: true,
  replyTimeoutMs: true,
  replyPrefix: true,
  partitions: true,
  partitionKey: true,
  serializer: true,
  deserializer: true,
};
const CLUSTER_CONNECTION: OptionNames<RedisStreamsClusterConnection> = {
  cluster: true,
  clusterOptions: true,
};
const PARTITION: OptionNames<Extract<PartitionsOption[string], object>> = { count: true };

/** Fills in the defaults and rejects invalid options with an error that names the option. */
export function resolveServerOptions(options: RedisStreamsServerOptions): ResolvedServerOptions {
  if (!options || typeof options !== 'object')
    throw new StreamBatchAckConfigError('options', 'ServerRedisStreams needs an options object.');
  checkOptionNames('ServerRedisStreams', options, SERVER_OPTIONS);
  checkConnection(options.connection);
  if (typeof options.group !== 'string' || options.group === '')
    throw new StreamBatchAckConfigError(
      'group',
      'give the consumer group name (a non-empty string).',
    );
  const resolved: ResolvedServerOptions = {
    connection: options.connection,
    group: options.group,
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
  if (retry.jitter >= 1)
    throw new StreamBatchAckConfigError('retry.jitter', `must be in [0, 1), got ${retry.jitter}.`);
  if (retry.maxMs * (1 + retry.jitter) >= claim.minIdleMs)
    throw new StreamBatchAckConfigError(
      'retry.maxMs',
      `the longest retry delay (${retry.maxMs} ms, +${retry.jitter * 100} % jitter) must stay below claim.minIdleMs (${claim.minIdleMs} ms), or other consumers take a waiting entry over.`,
    );
  if (typeof resolved.deadLetter.stream !== 'function')
    throw new StreamBatchAckConfigError(
      'deadLetter.stream',
      'must be a function (stream) => name.',
    );
  const idem = options.idempotency;
  if (idem !== undefined) {
    if (idem.store !== undefined && idem.store !== 'memory' && idem.store !== 'redis')
      throw new StreamBatchAckConfigError(
        'idempotency.store',
        `must be 'memory' or 'redis', got ${JSON.stringify(idem.store)}.`,
      );
    int('idempotency.ttlMs', idem.ttlMs, 1, 1);
    int('idempotency.lockMs', idem.lockMs, 1, 1);
    int('idempotency.maxSize', idem.maxSize, 1, 1);
  }
  return resolved;
}

/** Rejects invalid ClientRedisStreams options with an error that names the option. */
export function checkClientOptions(options: RedisStreamsClientOptions): void {
  if (!options || typeof options !== 'object')
    throw new StreamBatchAckConfigError('options', 'ClientRedisStreams needs an options object.');
  checkOptionNames('ClientRedisStreams', options, CLIENT_OPTIONS);
  checkConnection(options.connection);
  int('maxLen', options.maxLen, 0, 0);
  int('trimEvery', options.trimEvery, 1, 1);
  int('replyTimeoutMs', options.replyTimeoutMs, 1, 1);
  replyPrefix(options.replyPrefix);
  resolvePartitions(options.partitions);
  if (options.partitionKey !== undefined && typeof options.partitionKey !== 'function')
    throw new StreamBatchAckConfigError(
      'partitionKey',
      'must be a function (stream, data) => string | undefined.',
    );
}

/**
 * Refuses an option name that `tree` does not list, at every level it lists, naming the option
 * and the nearest valid name. Values that are not plain objects are left to the value checks.
 */
function checkOptionNames(
  owner: 'ServerRedisStreams' | 'ClientRedisStreams',
  options: object,
  tree: OptionTree,
): void {
  checkNames(owner, options, tree, '');
  const { connection, partitions } = options as { connection?: unknown; partitions?: unknown };
  if (isPlainObject(connection) && isClusterConnection(connection as never))
    checkNames(owner, connection, CLUSTER_CONNECTION, 'connection.');
  if (isPlainObject(partitions))
    for (const [stream, spec] of Object.entries(partitions))
      if (isPlainObject(spec)) checkNames(owner, spec, PARTITION, `partitions.${stream}.`);
}

function checkNames(owner: string, options: object, tree: OptionTree, path: string): void {
  const names = Object.keys(tree);
  for (const [name, value] of Object.entries(options)) {
    const option = `${path}${name}`;
    const sub = tree[name];
    if (sub === undefined) {
      const near = nearestName(name, names);
      throw new StreamBatchAckConfigError(
        option,
        `${owner} has no such option. ` +
          (near !== undefined
            ? `Did you mean "${path}${near}"?`
            : `The options${path ? ` of "${path.slice(0, -1)}"` : ''} are: ${names.join(', ')}.`),
      );
    }
    if (sub !== true && isPlainObject(value)) checkNames(owner, value, sub, `${option}.`);
  }
}

function isPlainObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function replyPrefix(value: string | undefined): string {
  if (value === undefined) return DEFAULT_REPLY_PREFIX;
  if (typeof value !== 'string' || value === '' || /[{}]/.test(value))
    throw new StreamBatchAckConfigError(
      'replyPrefix',
      `must be a non-empty string without "{" or "}" (a reply stream is <replyPrefix>{<uuid>}, the uuid being its Cluster hash tag), got ${JSON.stringify(value) ?? String(value)}.`,
    );
  return value;
}

function checkConnection(connection: unknown): void {
  if (typeof connection === 'string') {
    // The URL is quoted without its user info: error messages end up in logs.
    const shown = connection.replace(/\/\/[^\s/?#]*@/, '//***@');
    if (!/^rediss?:\/\//.test(connection))
      throw new StreamBatchAckConfigError(
        'connection',
        `expected a redis:// or rediss:// URL, got "${shown}".`,
      );
    if (!URL.canParse(connection))
      throw new StreamBatchAckConfigError(
        'connection',
        `"${shown}" is not a valid URL (check the host and that the port is 0-65535).`,
      );
    return;
  }
  if (!connection || typeof connection !== 'object')
    throw new StreamBatchAckConfigError(
      'connection',
      'give a redis:// URL, ioredis options, or { cluster: [{ host, port }, ...] }.',
    );
  if (
    isClusterConnection(connection as never) &&
    (connection as { cluster: unknown[] }).cluster.length === 0
  )
    throw new StreamBatchAckConfigError('connection.cluster', 'list at least one node.');
}

function num(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min)
    throw new StreamBatchAckConfigError(name, `must be a number >= ${min}, got ${String(value)}.`);
  return value;
}

function int(name: string, value: number | undefined, fallback: number, min: number): number {
  const n = num(name, value, fallback, min);
  if (!Number.isInteger(n))
    throw new StreamBatchAckConfigError(name, `must be a whole number, got ${n}.`);
  return n;
}
