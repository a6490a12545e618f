import { hostname } from 'node:os';
import { z } from 'zod';
import { parseDuration } from './duration';

export type CodeStrategyName = 'sequence' | 'hash' | 'snowflake';
export const CODE_STRATEGIES: readonly CodeStrategyName[] = ['sequence', 'hash', 'snowflake'];

/** The HTTP server: where it listens and how long it waits for clients. */
export interface HttpConfig {
  port: number;
  host: string;
  /** Base of the short URLs returned (no trailing slash); URLs pointing at its host are refused. */
  publicBaseUrl: string;
  /** Largest accepted request body, bytes. */
  bodyLimit: number;
  /** Longest time to receive a whole request (headers and body), ms; then the connection is closed. */
  requestTimeoutMs: number;
  /** Longest inactivity of a connection while a request is in progress, ms. */
  connectionTimeoutMs: number;
  /** How long an idle keep-alive connection stays open, ms. */
  keepAliveTimeoutMs: number;
  /** Requests served on one keep-alive connection before it is closed; 0: no limit. */
  maxRequestsPerSocket: number;
}

/** The database of the short URLs. */
export interface DatabaseConfig {
  /** `sqlite:<file>`, `postgres://...` or `mysql://...`. */
  url: string;
  /** Table of the short URLs (created on start if missing), and `<table>_meta` beside it. */
  table: string;
  /** Connections in the PostgreSQL / MySQL pool. */
  poolSize: number;
  /** Longest run of one statement, lock waits included, ms (server-side, with a client-side backstop). */
  statementTimeoutMs: number;
  /** Longest wait to open a connection or to get one from a busy pool, ms. */
  connectTimeoutMs: number;
}

/** Redis as the cache of code -> URL lookups. */
export interface CacheConfig {
  /** false: every redirect reads the database (no Redis at all). */
  enabled: boolean;
  redisUrl: string;
  /** REDIS_CLUSTER_NODES: the seed nodes of a Redis Cluster, used instead of `redisUrl`. */
  clusterNodes?: { host: string; port: number }[];
  /** Prefix of every Redis key of this app. */
  keyPrefix: string;
  /** Entries of the in-process tier in front of Redis (CACHE_L1_ENTRIES); 0: none. */
  l1Entries: number;
  /** Lifetime of a cached code -> URL entry, ms (spread +-10 % by jitter). */
  ttlMs: number;
  /** Lifetime of a cached "unknown code", ms. */
  missTtlMs: number;
  /** Longest wait for one Redis operation before answering from the database, ms. */
  operationTimeoutMs: number;
  /** After a Redis timeout, skip Redis for this long, ms. */
  cooldownMs: number;
  /** Longest wait at start-up for Redis, ms (the app starts anyway, uncached). */
  connectTimeoutMs: number;
}

/** How short codes are made. */
export interface CodesConfig {
  strategy: CodeStrategyName;
  /** 0..1023; distinct per running instance when CODE_STRATEGY=snowflake. */
  snowflakeWorkerId: number;
}

export interface HealthConfig {
  /** Timeout of each health check (database, Redis), ms. */
  timeoutMs: number;
}

/** Everything the shortener reads from its environment, one namespace per concern. */
export interface ShortenerConfig {
  http: HttpConfig;
  database: DatabaseConfig;
  cache: CacheConfig;
  codes: CodesConfig;
  health: HealthConfig;
}

/** A bad environment variable; the message names each one, its value, and what is allowed. */
export class ConfigError extends Error {
  readonly code = 'SHORTENER_CONFIG';
}

/*
 * One schema per variable. Each takes the raw string (undefined when unset), treats '' as
 * unset (except where '' is a meaningful value), and says in its issue message what it allows.
 */
type Raw = string | undefined;

function variable<T>(fallback: T, allowed: string, parse: (raw: string) => T | undefined) {
  return z
    .string()
    .optional()
    .transform((raw: Raw, ctx): T => {
      if (raw === undefined || raw.trim() === '') return fallback;
      const value = parse(raw.trim());
      if (value === undefined) {
        ctx.issues.push({ code: 'custom', message: allowed, input: raw });
        return z.NEVER;
      }
      return value;
    });
}

const integer = (fallback: number, min: number, max: number) =>
  variable(fallback, `an integer from ${min} to ${max}`, (raw) => {
    const n = Number(raw);
    return /^-?\d+$/.test(raw) && n >= min && n <= max ? n : undefined;
  });

const duration = (fallback: string) =>
  variable(
    parseDuration(fallback)!,
    'a duration above 0 such as 500ms, 30s, 10m, 1h or 1d',
    (raw) => {
      const ms = parseDuration(raw);
      return ms !== undefined && ms > 0 ? ms : undefined;
    },
  );

const boolean = (fallback: boolean) =>
  variable(fallback, 'true or false (also 1/0, yes/no, on/off)', (raw) => {
    const v = raw.toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(v)) return true;
    if (['0', 'false', 'no', 'off'].includes(v)) return false;
    return undefined;
  });

const text = (fallback: string) => variable(fallback, 'a non-empty text', (raw) => raw);

const oneOf = <T extends string>(fallback: T, values: readonly T[]) =>
  variable(fallback, `one of ${values.join(', ')}`, (raw) =>
    values.find((v) => v === raw.toLowerCase()),
  );

const urlOf = (fallback: string, schemes: string[], example: string) =>
  variable(fallback, `an absolute ${schemes.join(' or ')} URL such as ${example}`, (raw) => {
    try {
      return schemes.includes(new URL(raw).protocol.slice(0, -1)) ? raw : undefined;
    } catch {
      return undefined;
    }
  });

/** sqlite:<file>, file:<file>, a bare path, postgres(ql)://, mysql:// or mariadb://. */
const databaseUrl = variable(
  'sqlite:./shortener.sqlite',
  'sqlite:<file> (or sqlite::memory:), postgres://user:pass@host:5432/db or mysql://user:pass@host:3306/db',
  (raw) => {
    const scheme = /^([a-z]+):/i.exec(raw)?.[1]?.toLowerCase();
    const known = ['sqlite', 'file', 'postgres', 'postgresql', 'mysql', 'mariadb'];
    // One letter before ':' is a Windows drive (C:\...), a path.
    return !scheme || scheme.length === 1 || known.includes(scheme) ? raw : undefined;
  },
);

/**
 * `host:port,host:port,...` (IPv6 hosts in brackets: `[::1]:7001`): seed nodes of a Redis
 * Cluster; ioredis finds the other nodes from them.
 */
const clusterNodes = variable(
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

/** Letters, digits and _; 58 characters at most, so that `<table>_meta` fits every database. */
const tableName = variable(
  'short_urls',
  'a plain SQL identifier: a letter or _, then letters, digits or _, 58 characters at most',
  (raw) => (/^[A-Za-z_][A-Za-z0-9_]{0,57}$/.test(raw) ? raw : undefined),
);

function defaultWorkerId(): number {
  // Host and pid: distinct for instances on one host; set SNOWFLAKE_WORKER_ID across hosts.
  let h = process.pid;
  for (const c of hostname()) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h % 1024;
}

/** The environment variables of the shortener (see the app README), validated and typed. */
export const shortenerEnvSchema = z.object({
  PORT: integer(3000, 0, 65535),
  HOST: text('0.0.0.0'),
  PUBLIC_BASE_URL: urlOf('', ['http', 'https'], 'https://sho.rt'),
  BODY_LIMIT: integer(16 * 1024, 256, 10 * 1024 * 1024),
  HTTP_REQUEST_TIMEOUT: duration('10s'),
  HTTP_CONNECTION_TIMEOUT: duration('30s'),
  HTTP_KEEP_ALIVE_TIMEOUT: duration('72s'),
  HTTP_MAX_REQUESTS_PER_SOCKET: integer(0, 0, 1_000_000),

  DATABASE_URL: databaseUrl,
  DATABASE_TABLE: tableName,
  DB_POOL_SIZE: integer(10, 1, 1000),
  DB_STATEMENT_TIMEOUT: duration('5s'),
  DB_CONNECT_TIMEOUT: duration('5s'),

  CACHE_ENABLED: boolean(true),
  REDIS_URL: urlOf('redis://127.0.0.1:6379', ['redis', 'rediss'], 'redis://127.0.0.1:6379'),
  REDIS_CLUSTER_NODES: clusterNodes,
  // '' is a valid prefix (no prefix): only an unset variable takes the default.
  REDIS_KEY_PREFIX: z.string().optional().default('shortener:'),
  CACHE_L1_ENTRIES: integer(0, 0, 10_000_000),
  CACHE_TTL: duration('10m'),
  MISS_CACHE_TTL: duration('30s'),
  REDIS_OPERATION_TIMEOUT: duration('500ms'),
  REDIS_COOLDOWN: duration('1s'),
  REDIS_CONNECT_TIMEOUT: duration('2s'),

  CODE_STRATEGY: oneOf<CodeStrategyName>('sequence', CODE_STRATEGIES),
  SNOWFLAKE_WORKER_ID: variable(
    undefined as number | undefined,
    'an integer from 0 to 1023',
    (raw) => (/^\d+$/.test(raw) && Number(raw) <= 1023 ? Number(raw) : undefined),
  ),

  HEALTH_TIMEOUT: duration('1s'),
});

/** The variables by name, as strings (what a test or a `.env` sets). */
export type ShortenerEnv = { [K in keyof z.input<typeof shortenerEnvSchema>]?: string };

/** Reads the configuration from environment variables; throws ConfigError naming every bad one. */
export function parseShortenerEnv(
  env: NodeJS.ProcessEnv | ShortenerEnv = process.env,
): ShortenerConfig {
  const result = shortenerEnvSchema.safeParse(pick(env));
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const name = String(issue.path[0]);
      return `${name}=${JSON.stringify(env[name as keyof ShortenerEnv] ?? '')} is not valid: expected ${issue.message}`;
    });
    throw new ConfigError(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  const e = result.data;
  return {
    http: {
      port: e.PORT,
      host: e.HOST,
      publicBaseUrl: (e.PUBLIC_BASE_URL || `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
      bodyLimit: e.BODY_LIMIT,
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT,
      connectionTimeoutMs: e.HTTP_CONNECTION_TIMEOUT,
      keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT,
      maxRequestsPerSocket: e.HTTP_MAX_REQUESTS_PER_SOCKET,
    },
    database: {
      url: e.DATABASE_URL,
      table: e.DATABASE_TABLE,
      poolSize: e.DB_POOL_SIZE,
      statementTimeoutMs: e.DB_STATEMENT_TIMEOUT,
      connectTimeoutMs: e.DB_CONNECT_TIMEOUT,
    },
    cache: {
      enabled: e.CACHE_ENABLED,
      redisUrl: e.REDIS_URL,
      ...(e.REDIS_CLUSTER_NODES ? { clusterNodes: e.REDIS_CLUSTER_NODES } : {}),
      keyPrefix: e.REDIS_KEY_PREFIX,
      l1Entries: e.CACHE_L1_ENTRIES,
      ttlMs: e.CACHE_TTL,
      missTtlMs: e.MISS_CACHE_TTL,
      operationTimeoutMs: e.REDIS_OPERATION_TIMEOUT,
      cooldownMs: e.REDIS_COOLDOWN,
      connectTimeoutMs: e.REDIS_CONNECT_TIMEOUT,
    },
    codes: {
      strategy: e.CODE_STRATEGY,
      snowflakeWorkerId: e.SNOWFLAKE_WORKER_ID ?? defaultWorkerId(),
    },
    health: { timeoutMs: e.HEALTH_TIMEOUT },
  };
}

/** Only the shortener's own variables (process.env holds many others, none of them checked). */
function pick(env: NodeJS.ProcessEnv | ShortenerEnv): Record<string, string | undefined> {
  const picked: Record<string, string | undefined> = {};
  for (const name of Object.keys(shortenerEnvSchema.shape)) {
    picked[name] = (env as Record<string, string | undefined>)[name];
  }
  return picked;
}
