import { hostname } from 'node:os';
import { DEFAULT_TICK_LIMITS, TickLimits } from './candles/tick';

/** Everything the demo reads from the environment, with defaults (see the app README). */
export interface TicksConfig {
  redisUrl: string;
  http: { host: string; port: number };
  stream: string;
  group: string;
  consumer: string;
  deadLetterStream: string;
  keyPrefix: string;
  read: { count: number; blockMs: number };
  ack: { batchSize: number; intervalMs: number; maxPending: number };
  claim: { minIdleMs: number; intervalMs: number; count: number };
  maxDeliveries: number;
  concurrency: number;
  idempotency: { ttlMs: number; maxSize: number; lockMs: number };
  candlesKeep: number;
  applyBatchMax: number;
  health: { maxLag: number; maxPending: number; timeoutMs: number };
  /** What a valid tick is: price and quantity maxima, the time window. */
  limits: TickLimits;
  collector: CollectorConfig;
  /** Run the collector in the same process as the consumer (main.ts). */
  collectorInProcess: boolean;
  logLevel: 'debug' | 'log' | 'warn' | 'error' | 'silent';
}

export interface CollectorConfig {
  redisUrl: string;
  stream: string;
  symbols: number;
  /** Ticks per second per symbol. */
  ratePerSymbol: number;
  /** Stop after this many ms (0 = run until stopped). */
  durationMs: number;
  /** Replay this JSON-lines file instead of generating ticks. */
  replayFile?: string;
  /** Keep the stream near this many entries (never deleting unacknowledged ones; 0 = no trimming). */
  maxLen: number;
  /** Random seed of the synthetic ticks (0 = random). */
  seed: number;
}

/** A configuration value that cannot be used; the message names the variable. */
export class TicksConfigError extends Error {
  readonly code = 'TICKS_CONFIG_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'TicksConfigError';
  }
}

type Env = Record<string, string | undefined>;

function int(
  env: Env,
  name: string,
  fallback: number,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new TicksConfigError(
      `${name} must be a whole number from ${min} to ${max} (got "${raw}")`,
    );
  return n;
}

function positive(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0)
    throw new TicksConfigError(`${name} must be a positive number (got "${raw}")`);
  return n;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(raw)) return true;
  if (/^(0|false|no|off)$/i.test(raw)) return false;
  throw new TicksConfigError(`${name} must be true or false (got "${raw}")`);
}

function str(env: Env, name: string, fallback: string): string {
  const raw = env[name];
  return raw === undefined || raw.trim() === '' ? fallback : raw.trim();
}

/** Reads the configuration from `env` (default: process.env); throws TicksConfigError on bad values. */
export function loadTicksConfig(env: Env = process.env): TicksConfig {
  const redisUrl = str(env, 'REDIS_URL', 'redis://127.0.0.1:6379');
  if (!/^rediss?:\/\//.test(redisUrl))
    throw new TicksConfigError(
      `REDIS_URL must start with redis:// or rediss:// (got "${redisUrl}")`,
    );
  const stream = str(env, 'TICKS_STREAM', 'ticks');
  const logLevel = str(env, 'LOG_LEVEL', 'log');
  if (!['debug', 'log', 'warn', 'error', 'silent'].includes(logLevel))
    throw new TicksConfigError(
      `LOG_LEVEL must be debug, log, warn, error or silent (got "${logLevel}")`,
    );
  const replayFile = env.COLLECTOR_REPLAY_FILE?.trim() || undefined;
  return {
    redisUrl,
    http: { host: str(env, 'HOST', '0.0.0.0'), port: int(env, 'PORT', 3001, 0, 65535) },
    stream,
    group: str(env, 'TICKS_GROUP', 'candles'),
    consumer: str(env, 'TICKS_CONSUMER', `${hostname()}-${process.pid}`),
    deadLetterStream: str(env, 'TICKS_DEAD_LETTER_STREAM', `${stream}:dlq`),
    keyPrefix: str(env, 'TICKS_KEY_PREFIX', 'ticks:'),
    read: { count: int(env, 'READ_COUNT', 500, 1), blockMs: int(env, 'READ_BLOCK_MS', 100, 1) },
    ack: {
      batchSize: int(env, 'ACK_BATCH_SIZE', 1000, 1),
      intervalMs: int(env, 'ACK_INTERVAL_MS', 50, 1),
      maxPending: int(env, 'ACK_MAX_PENDING', 50_000, 1),
    },
    claim: {
      minIdleMs: int(env, 'CLAIM_MIN_IDLE_MS', 30_000, 1),
      intervalMs: int(env, 'CLAIM_INTERVAL_MS', 100, 1),
      count: int(env, 'CLAIM_COUNT', 1000, 1),
    },
    maxDeliveries: int(env, 'MAX_DELIVERIES', 5, 1),
    concurrency: int(env, 'CONCURRENCY', 2000, 1),
    idempotency: {
      ttlMs: int(env, 'IDEMPOTENCY_TTL_MS', 60_000, 1),
      maxSize: int(env, 'IDEMPOTENCY_MAX_SIZE', 100_000, 1),
      lockMs: int(env, 'IDEMPOTENCY_LOCK_MS', 30_000, 1),
    },
    candlesKeep: int(env, 'CANDLES_KEEP', 1440, 0),
    applyBatchMax: int(env, 'APPLY_BATCH_MAX', 256, 1, 5000),
    health: {
      maxLag: int(env, 'HEALTH_MAX_LAG', 10_000, 0),
      maxPending: int(env, 'HEALTH_MAX_PENDING', 50_000, 0),
      timeoutMs: int(env, 'HEALTH_TIMEOUT_MS', 1_000, 1),
    },
    limits: {
      maxPrice: positive(env, 'TICK_MAX_PRICE', DEFAULT_TICK_LIMITS.maxPrice),
      maxQty: positive(env, 'TICK_MAX_QTY', DEFAULT_TICK_LIMITS.maxQty),
      maxAgeMs: int(env, 'TICK_MAX_AGE_MS', DEFAULT_TICK_LIMITS.maxAgeMs, 0),
      maxFutureMs: int(env, 'TICK_MAX_FUTURE_MS', DEFAULT_TICK_LIMITS.maxFutureMs, 0),
    },
    collector: {
      redisUrl,
      stream,
      symbols: int(env, 'COLLECTOR_SYMBOLS', 100, 1, 100_000),
      ratePerSymbol: int(env, 'COLLECTOR_RATE', 100, 1, 1_000_000),
      durationMs: int(env, 'COLLECTOR_DURATION_MS', 0, 0),
      replayFile,
      maxLen: int(env, 'COLLECTOR_MAX_LEN', 100_000, 0),
      seed: int(env, 'COLLECTOR_SEED', 0, 0),
    },
    collectorInProcess: bool(env, 'COLLECTOR', true),
    logLevel: logLevel as TicksConfig['logLevel'],
  };
}
