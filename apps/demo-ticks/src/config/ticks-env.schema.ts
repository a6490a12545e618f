/*
 * The environment variables of the demo (see the app README), validated with zod and turned into
 * one typed object per concern: the namespaces that TicksConfigModule registers with
 * @nestjs/config.
 */
import { hostname } from 'node:os';
import { z } from 'zod';
import { defaultDeadLetterStream } from '@nest-redis-resilience/stream-batch-ack';
import { hashTag } from '../redis/redis-keys';
import { DEFAULT_TICK_LIMITS } from '../candles/tick';

/** A configuration value that cannot be used; the message names the variable, its value and what is allowed. */
export class TicksConfigError extends Error {
  readonly code = 'TICKS_CONFIG_INVALID';
  constructor(
    message: string,
    /** The variables at fault. */
    readonly variables: string[],
  ) {
    super(message);
    this.name = 'TicksConfigError';
  }
}

export type Env = Record<string, string | undefined>;

/*
 * One schema per variable, as in the shortener demo: each takes the raw string (undefined when
 * unset), treats blank as unset, trims it, and says in its issue message what it allows;
 * parseTicksEnv adds the name and the value.
 */
function variable<T>(fallback: T, allowed: string, parse: (raw: string) => T | undefined) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): T => {
      if (raw === undefined || raw.trim() === '') return fallback;
      const value = parse(raw.trim());
      if (value === undefined) {
        ctx.issues.push({ code: 'custom', message: allowed, input: raw });
        return z.NEVER;
      }
      return value;
    });
}

/** A finite number, written as JavaScript reads it (`1e3`, `0x10`); undefined otherwise. */
function toNumber(raw: string): number | undefined {
  const n = Number(raw);
  return Number.isFinite(n) ? n : undefined;
}

function wholeNumber(fallback: number, min: number, max?: number) {
  const allowed =
    max === undefined ? `a whole number >= ${min}` : `a whole number from ${min} to ${max}`;
  return variable(fallback, allowed, (raw) => {
    const n = toNumber(raw);
    return n !== undefined && Number.isInteger(n) && n >= min && (max === undefined || n <= max)
      ? n
      : undefined;
  });
}

function positiveNumber(fallback: number) {
  return variable(fallback, 'a positive number (at most 1.7976931348623157e308)', (raw) => {
    const n = toNumber(raw);
    return n !== undefined && n > 0 ? n : undefined;
  });
}

function boolean(fallback: boolean) {
  return variable(fallback, 'true or false (also 1/0, yes/no, on/off)', (raw) => {
    const v = raw.toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(v)) return true;
    if (['0', 'false', 'no', 'off'].includes(v)) return false;
    return undefined;
  });
}

const text = (fallback: string) => variable(fallback, 'a text', (raw) => raw);

const optionalText = () => variable(undefined as string | undefined, 'a text', (raw) => raw);

const oneOf = <T extends string>(fallback: T, values: readonly T[]) =>
  variable(fallback, `one of ${values.join(', ')}`, (raw) => values.find((v) => v === raw));

/**
 * REDIS_CLUSTER_NODES: `host:port,host:port,...` (IPv6 hosts in brackets: `[::1]:7001`), the seed
 * nodes of a Redis Cluster; ioredis finds the other nodes from them.
 */
const clusterNodes = () =>
  variable(
    undefined as { host: string; port: number }[] | undefined,
    'a comma-separated list of host:port seed nodes of a Redis Cluster, such as 127.0.0.1:7001,127.0.0.1:7002',
    (raw) => {
      const nodes = raw.split(',').map((part) => {
        const m = /^(?:\[([^\]]+)\]|([^:\s[\]]+)):(\d{1,5})$/.exec(part.trim());
        const port = Number(m?.[3]);
        return m && port >= 1 && port <= 65535 ? { host: m[1] ?? m[2], port } : undefined;
      });
      return nodes.every((n) => n !== undefined) ? nodes : undefined;
    },
  );

export const LOG_LEVELS = ['debug', 'log', 'warn', 'error', 'silent'] as const;

/** Every variable, as zod reads it (unknown variables are ignored). */
export const ticksEnvSchema = z.object({
  REDIS_URL: variable('redis://127.0.0.1:6379', 'a redis:// or rediss:// URL', (raw) =>
    /^rediss?:\/\//.test(raw) ? raw : undefined,
  ),
  REDIS_CLUSTER_NODES: clusterNodes(),
  HOST: text('0.0.0.0'),
  PORT: wholeNumber(3001, 0, 65535),
  TICKS_STREAM: text('ticks'),
  TICKS_PARTITIONS: wholeNumber(0, 0, 1024),
  TICKS_GROUP: text('candles'),
  TICKS_CONSUMER: optionalText(),
  TICKS_DEAD_LETTER_STREAM: optionalText(),
  TICKS_KEY_PREFIX: text('ticks:'),
  READ_COUNT: wholeNumber(500, 1),
  READ_BLOCK_MS: wholeNumber(100, 1),
  ACK_BATCH_SIZE: wholeNumber(1000, 1),
  ACK_INTERVAL_MS: wholeNumber(50, 1),
  ACK_MAX_PENDING: wholeNumber(50_000, 1),
  CLAIM_MIN_IDLE_MS: wholeNumber(30_000, 1),
  CLAIM_INTERVAL_MS: wholeNumber(100, 1),
  CLAIM_COUNT: wholeNumber(1000, 1),
  MAX_DELIVERIES: wholeNumber(5, 1),
  CONCURRENCY: wholeNumber(2000, 1),
  IDEMPOTENCY_TTL_MS: wholeNumber(60_000, 1),
  IDEMPOTENCY_MAX_SIZE: wholeNumber(100_000, 1),
  IDEMPOTENCY_LOCK_MS: wholeNumber(30_000, 1),
  APPLY_BATCH_MAX: wholeNumber(256, 1, 5000),
  CANDLES_KEEP: wholeNumber(1440, 0),
  HEALTH_MAX_LAG: wholeNumber(10_000, 0),
  HEALTH_MAX_PENDING: wholeNumber(50_000, 0),
  HEALTH_TIMEOUT_MS: wholeNumber(1000, 1),
  TICK_MAX_PRICE: positiveNumber(DEFAULT_TICK_LIMITS.maxPrice),
  TICK_MAX_QTY: positiveNumber(DEFAULT_TICK_LIMITS.maxQty),
  TICK_MAX_AGE_MS: wholeNumber(DEFAULT_TICK_LIMITS.maxAgeMs, 0),
  TICK_MAX_FUTURE_MS: wholeNumber(DEFAULT_TICK_LIMITS.maxFutureMs, 0),
  LOG_LEVEL: oneOf<(typeof LOG_LEVELS)[number]>('log', LOG_LEVELS),
  COLLECTOR: boolean(true),
  COLLECTOR_SYMBOLS: wholeNumber(100, 1, 100_000),
  COLLECTOR_RATE: wholeNumber(100, 1, 1_000_000),
  COLLECTOR_DURATION_MS: wholeNumber(0, 0),
  COLLECTOR_REPLAY_FILE: optionalText(),
  COLLECTOR_MAX_LEN: wholeNumber(100_000, 0),
  COLLECTOR_SEED: wholeNumber(0, 0),
  COLLECTOR_REPORT_MS: wholeNumber(10_000, 100),
});

export type TicksEnv = z.output<typeof ticksEnvSchema>;

/**
 * What a Redis Cluster needs of the names (REDIS_CLUSTER_NODES set): a script touches the stream,
 * its entries' idempotency records, the candles and the dead-letter stream at once, so they must
 * share one hash slot. The records are `<TICKS_KEY_PREFIX>idem:<TICKS_GROUP>:<stream>:<id>` and the
 * candles carry the stream's hash tag, so: the stream has a hash tag, and the prefix and the group
 * have none (theirs would win).
 */
function clusterProblems(env: TicksEnv): { variable: string; problem: string }[] {
  const problems: { variable: string; problem: string }[] = [];
  if (env.TICKS_PARTITIONS > 0) {
    if (/[{}]/.test(env.TICKS_STREAM))
      problems.push({
        variable: 'TICKS_STREAM',
        problem:
          'must not contain "{" or "}" with TICKS_PARTITIONS: each partition gets a hash tag of its own (<stream>:{<tag>})',
      });
    if (env.TICKS_DEAD_LETTER_STREAM !== undefined && env.REDIS_CLUSTER_NODES)
      problems.push({
        variable: 'TICKS_DEAD_LETTER_STREAM',
        problem:
          'must be unset with TICKS_PARTITIONS on a Redis Cluster: each partition has its own, <partition>:dlq, in its slot',
      });
  }
  if (!env.REDIS_CLUSTER_NODES) return problems;
  const tag = hashTag(env.TICKS_STREAM);
  if (!tag && env.TICKS_PARTITIONS === 0)
    problems.push({
      variable: 'TICKS_STREAM',
      problem: `must contain a hash tag on a Redis Cluster (REDIS_CLUSTER_NODES) unless TICKS_PARTITIONS is set, such as {${env.TICKS_STREAM}}, so that its idempotency records and candles share its slot`,
    });
  for (const name of ['TICKS_KEY_PREFIX', 'TICKS_GROUP'] as const)
    if (/[{}]/.test(env[name]))
      problems.push({
        variable: name,
        problem: `must not contain "{" or "}" on a Redis Cluster (REDIS_CLUSTER_NODES): the keys take the hash tag of the stream`,
      });
  const dlq = env.TICKS_DEAD_LETTER_STREAM;
  if (dlq !== undefined && tag && hashTag(dlq) !== tag)
    problems.push({
      variable: 'TICKS_DEAD_LETTER_STREAM',
      problem: `must carry the stream's hash tag {${tag}} on a Redis Cluster (REDIS_CLUSTER_NODES), or be unset (<stream>:dlq)`,
    });
  return problems;
}

/** The namespaces, one per concern. */
export function toSettings(env: TicksEnv) {
  const stream = env.TICKS_STREAM;
  return {
    /** `clusterNodes` (REDIS_CLUSTER_NODES): a Redis Cluster, used instead of `url`. */
    redis: { url: env.REDIS_URL, clusterNodes: env.REDIS_CLUSTER_NODES },
    /** The stream, its consumer group, and the transport's options. */
    consumer: {
      stream,
      /** TICKS_PARTITIONS: the stream is split into this many partitions by symbol (0: not split). */
      partitions: env.TICKS_PARTITIONS,
      group: env.TICKS_GROUP,
      consumer: env.TICKS_CONSUMER ?? `${hostname()}-${process.pid}`,
      deadLetterStream: env.TICKS_DEAD_LETTER_STREAM ?? defaultDeadLetterStream(stream),
      /** No TICKS_DEAD_LETTER_STREAM: each stream has its own, `<stream>:dlq` (in its Cluster slot). */
      deadLetterPerStream: env.TICKS_DEAD_LETTER_STREAM === undefined,
      read: { count: env.READ_COUNT, blockMs: env.READ_BLOCK_MS },
      ack: {
        batchSize: env.ACK_BATCH_SIZE,
        intervalMs: env.ACK_INTERVAL_MS,
        maxPending: env.ACK_MAX_PENDING,
      },
      claim: {
        minIdleMs: env.CLAIM_MIN_IDLE_MS,
        intervalMs: env.CLAIM_INTERVAL_MS,
        count: env.CLAIM_COUNT,
      },
      maxDeliveries: env.MAX_DELIVERIES,
      concurrency: env.CONCURRENCY,
      idempotency: {
        ttlMs: env.IDEMPOTENCY_TTL_MS,
        maxSize: env.IDEMPOTENCY_MAX_SIZE,
        lockMs: env.IDEMPOTENCY_LOCK_MS,
      },
    },
    /** The candle store in Redis. */
    candles: {
      keyPrefix: env.TICKS_KEY_PREFIX,
      keep: env.CANDLES_KEEP,
      applyBatchMax: env.APPLY_BATCH_MAX,
    },
    http: {
      host: env.HOST,
      port: env.PORT,
      health: {
        maxLag: env.HEALTH_MAX_LAG,
        maxPending: env.HEALTH_MAX_PENDING,
        timeoutMs: env.HEALTH_TIMEOUT_MS,
      },
    },
    /** What a valid tick is. */
    limits: {
      maxPrice: env.TICK_MAX_PRICE,
      maxQty: env.TICK_MAX_QTY,
      maxAgeMs: env.TICK_MAX_AGE_MS,
      maxFutureMs: env.TICK_MAX_FUTURE_MS,
    },
    collector: {
      /** Run the collector in the consumer's process (main.ts). */
      inProcess: env.COLLECTOR,
      stream,
      partitions: env.TICKS_PARTITIONS,
      symbols: env.COLLECTOR_SYMBOLS,
      /** Ticks per second per symbol. */
      ratePerSymbol: env.COLLECTOR_RATE,
      /** Stop after this many ms (0 = run until stopped). */
      durationMs: env.COLLECTOR_DURATION_MS,
      /** Replay this JSON-lines file instead of generating ticks. */
      replayFile: env.COLLECTOR_REPLAY_FILE,
      /** Keep the stream near this many entries (never deleting unacknowledged ones; 0 = no trimming). */
      maxLen: env.COLLECTOR_MAX_LEN,
      /** Random seed of the synthetic ticks (0 = random). */
      seed: env.COLLECTOR_SEED,
      /** How often the synthetic collector logs the rate it reached, ms. */
      reportEveryMs: env.COLLECTOR_REPORT_MS,
    },
    logging: { level: env.LOG_LEVEL },
  };
}

export type TicksSettings = ReturnType<typeof toSettings>;
export type RedisSettings = TicksSettings['redis'];
export type ConsumerSettings = TicksSettings['consumer'];
export type CandlesSettings = TicksSettings['candles'];
export type HttpSettings = TicksSettings['http'];
export type LimitsSettings = TicksSettings['limits'];
export type CollectorSettings = TicksSettings['collector'];
export type LoggingSettings = TicksSettings['logging'];
export type LogLevelName = LoggingSettings['level'];

/**
 * Validates `env` (default: process.env) and returns the namespaces. Throws TicksConfigError
 * naming every bad variable, its value and what is allowed.
 */
export function parseTicksEnv(env: Env = process.env): TicksSettings {
  const result = ticksEnvSchema.safeParse(env);
  if (!result.success) {
    const variables: string[] = [];
    const problems = result.error.issues.map((issue) => {
      const name = String(issue.path[0] ?? '');
      variables.push(name);
      const raw = env[name];
      const shown = raw === undefined ? 'unset' : `got ${JSON.stringify(raw)}`;
      return `${name} must be ${issue.message} (${shown})`;
    });
    throw new TicksConfigError(problems.join('; '), variables);
  }
  const cluster = clusterProblems(result.data);
  if (cluster.length > 0) {
    const problems = cluster.map(({ variable, problem }) => {
      const raw = env[variable];
      const shown =
        raw === undefined
          ? `unset: ${JSON.stringify(result.data[variable as keyof TicksEnv])}`
          : `got ${JSON.stringify(raw)}`;
      return `${variable} ${problem} (${shown})`;
    });
    throw new TicksConfigError(
      problems.join('; '),
      cluster.map((c) => c.variable),
    );
  }
  return toSettings(result.data);
}
