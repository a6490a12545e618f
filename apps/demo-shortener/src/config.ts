import { hostname } from 'node:os';

export type CodeStrategyName = 'sequence' | 'hash' | 'snowflake';
export const CODE_STRATEGIES: readonly CodeStrategyName[] = ['sequence', 'hash', 'snowflake'];

/** Everything the shortener reads from its environment (see the app README). */
export interface ShortenerConfig {
  port: number;
  host: string;
  /** `sqlite:<file>` (default `sqlite:./shortener.sqlite`), `postgres://...` or `mysql://...`. */
  databaseUrl: string;
  /** Table of the short URLs (created on start if missing). */
  databaseTable: string;
  /** Connections in the PostgreSQL / MySQL pool. */
  dbPoolSize: number;
  redisUrl: string;
  /** false: every redirect reads the database (no Redis at all). */
  cacheEnabled: boolean;
  /** Prefix of every Redis key of this app. */
  redisKeyPrefix: string;
  /** Lifetime of a cached code -> URL entry, ms (spread +-10 % by jitter). */
  cacheTtlMs: number;
  /** Lifetime of a cached "unknown code", ms. */
  missCacheTtlMs: number;
  /** Longest wait for one Redis operation before answering from the database, ms. */
  redisOperationTimeoutMs: number;
  /** After a Redis timeout, skip Redis for this long, ms. */
  redisCooldownMs: number;
  /** Longest wait at start-up for Redis, ms (the app starts anyway, uncached). */
  redisConnectTimeoutMs: number;
  codeStrategy: CodeStrategyName;
  /** 0..1023; distinct per running instance when CODE_STRATEGY=snowflake. */
  snowflakeWorkerId: number;
  /** Base of the short URLs returned; URLs pointing at its host are refused. */
  publicBaseUrl: string;
  /** Largest accepted request body, bytes. */
  bodyLimit: number;
  /** Timeout of each health check (database, Redis), ms. */
  healthTimeoutMs: number;
}

export class ConfigError extends Error {
  readonly code = 'SHORTENER_CONFIG';
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  }
  return n;
}

/** `1500`, `1500ms`, `30s`, `10m`, `1h` -> ms. */
export function parseDuration(raw: string, name: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/.exec(raw.trim());
  if (!m) throw new ConfigError(`${name} must be a duration like 500ms, 30s or 10m, got "${raw}"`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 'ms') as 'ms'];
  const ms = Math.round(Number(m[1]) * unit);
  if (ms <= 0) throw new ConfigError(`${name} must be longer than 0, got "${raw}"`);
  return ms;
}

function duration(env: NodeJS.ProcessEnv, name: string, fallback: string): number {
  const raw = env[name];
  return parseDuration(raw === undefined || raw === '' ? fallback : raw, name);
}

function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function defaultWorkerId(): number {
  // Host and pid: distinct for instances on one host; set SNOWFLAKE_WORKER_ID across hosts.
  let h = process.pid;
  for (const c of hostname()) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h % 1024;
}

/** Reads the configuration from environment variables; throws ConfigError naming the bad one. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ShortenerConfig {
  return resolveConfig({}, env);
}

/** The environment's configuration with `overrides` on top (what tests and benchmarks use), validated. */
export function resolveConfig(
  overrides: Partial<ShortenerConfig> = {},
  env: NodeJS.ProcessEnv = process.env,
): ShortenerConfig {
  const port = overrides.port ?? int(env, 'PORT', 3000, 0, 65535);
  const config: ShortenerConfig = {
    port,
    host: env.HOST || '0.0.0.0',
    databaseUrl: env.DATABASE_URL || 'sqlite:./shortener.sqlite',
    databaseTable: env.DATABASE_TABLE || 'short_urls',
    dbPoolSize: int(env, 'DB_POOL_SIZE', 10, 1, 1000),
    redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
    cacheEnabled: bool(env, 'CACHE_ENABLED', true),
    redisKeyPrefix: env.REDIS_KEY_PREFIX ?? 'shortener:',
    cacheTtlMs: duration(env, 'CACHE_TTL', '10m'),
    missCacheTtlMs: duration(env, 'MISS_CACHE_TTL', '30s'),
    redisOperationTimeoutMs: duration(env, 'REDIS_OPERATION_TIMEOUT', '500ms'),
    redisCooldownMs: duration(env, 'REDIS_COOLDOWN', '1s'),
    redisConnectTimeoutMs: duration(env, 'REDIS_CONNECT_TIMEOUT', '2s'),
    codeStrategy: (env.CODE_STRATEGY || 'sequence').trim().toLowerCase() as CodeStrategyName,
    snowflakeWorkerId: int(env, 'SNOWFLAKE_WORKER_ID', defaultWorkerId(), 0, 1023),
    publicBaseUrl: env.PUBLIC_BASE_URL || `http://localhost:${port}`,
    bodyLimit: int(env, 'BODY_LIMIT', 16 * 1024, 256, 10 * 1024 * 1024),
    healthTimeoutMs: duration(env, 'HEALTH_TIMEOUT', '1s'),
    ...overrides,
  };
  if (!CODE_STRATEGIES.includes(config.codeStrategy)) {
    throw new ConfigError(
      `CODE_STRATEGY must be one of ${CODE_STRATEGIES.join(', ')}, got "${config.codeStrategy}"`,
    );
  }
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(config.databaseTable)) {
    throw new ConfigError(
      `DATABASE_TABLE must be a plain SQL identifier (letters, digits, _), got "${config.databaseTable}"`,
    );
  }
  if (
    !Number.isInteger(config.snowflakeWorkerId) ||
    config.snowflakeWorkerId < 0 ||
    config.snowflakeWorkerId > 1023
  ) {
    throw new ConfigError(`SNOWFLAKE_WORKER_ID must be 0..1023, got ${config.snowflakeWorkerId}`);
  }
  let base: URL;
  try {
    base = new URL(config.publicBaseUrl);
  } catch {
    throw new ConfigError(`PUBLIC_BASE_URL must be an absolute URL, got "${config.publicBaseUrl}"`);
  }
  if (!['http:', 'https:'].includes(base.protocol)) {
    throw new ConfigError(`PUBLIC_BASE_URL must be http or https, got "${config.publicBaseUrl}"`);
  }
  config.publicBaseUrl = config.publicBaseUrl.replace(/\/+$/, '');
  return config;
}
