import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LoggerService, LogLevel } from '@nestjs/common';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Connection, createConnection } from 'mysql2/promise';
import { Client } from 'pg';
import { createShortenerApp, CreateShortenerAppOptions } from '../../src/app.factory';
import type { ShortenerEnv } from '../../src/config';
import type { UrlRepository } from '../../src/db/url-repository';
import { ShortenerMetrics } from '../../src/metrics/shortener-metrics';
import { URL_REPOSITORY } from '../../src/shortener.constants';
import { cacheKeyPrefix, urlCacheKey } from '../../src/urls/cache-keys';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const POSTGRES_URL =
  process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
export const PUBLIC_BASE_URL = 'http://sho.rt';

/** A name of this test run alone: Redis key prefix, table name, file name. */
export function runId(name: string): string {
  return `${name}_${randomBytes(4).toString('hex')}`;
}

/** A SQLite file under the OS temp dir; `remove()` deletes it and its WAL files. */
export function tempSqlite(id: string): { url: string; remove(): void } {
  const file = join(tmpdir(), `shortener-${id}.sqlite`);
  return {
    url: `sqlite:${file}`,
    remove: () => {
      for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
    },
  };
}

/** Fails with a clear message when the test PostgreSQL does not answer. */
export async function requirePostgres(): Promise<void> {
  const client = new Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new Error(
      `PostgreSQL is not reachable at ${POSTGRES_URL} (${(err as Error).message}). ` +
        'These tests need it: start PostgreSQL (trust auth, database "test") or set TEST_POSTGRES_URL.',
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Fails with a clear message when the test MySQL / MariaDB does not answer. */
export async function requireMysql(): Promise<void> {
  let conn: Connection | undefined;
  try {
    conn = await createConnection({ uri: MYSQL_URL, connectTimeout: 3000 });
    await conn.query('SELECT 1');
  } catch (err) {
    throw new Error(
      `MySQL/MariaDB is not reachable at ${MYSQL_URL} (${(err as Error).message}). ` +
        'These tests need it: start MariaDB (root without password, database "test") or set TEST_MYSQL_URL.',
    );
  } finally {
    await conn?.end().catch(() => undefined);
  }
}

export { deleteKeys } from '../../../../test/support/redis';

/**
 * An initialized app (not listening) configured by test defaults with `env` on top. Only these
 * variables count: the shell's own (CODE_STRATEGY, CACHE_TTL...) do not leak in.
 */
export async function startApp(
  env: ShortenerEnv,
  options: CreateShortenerAppOptions = { logger: false },
): Promise<NestFastifyApplication> {
  const app = await createShortenerApp(
    {
      PUBLIC_BASE_URL,
      REDIS_URL,
      CACHE_ENABLED: 'true',
      CODE_STRATEGY: 'sequence',
      CACHE_TTL: '60s',
      MISS_CACHE_TTL: '30s',
      REDIS_OPERATION_TIMEOUT: '250ms',
      REDIS_COOLDOWN: '1s',
      HEALTH_TIMEOUT: '1s',
      BODY_LIMIT: '16384',
      DB_POOL_SIZE: '10',
      ...env,
    },
    options,
  );
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  return app;
}

export function dbLookups(app: NestFastifyApplication): Promise<number> {
  return app.get(ShortenerMetrics).dbLookupCount();
}

export function repositoryOf(app: NestFastifyApplication): UrlRepository {
  return app.get<UrlRepository>(URL_REPOSITORY);
}

/** The Redis key of the cached record of `code` in `app` (REDIS_KEY_PREFIX `prefix`). */
export function urlKeyOf(app: NestFastifyApplication, prefix: string, code: string): string {
  return `${cacheKeyPrefix(prefix, repositoryOf(app).databaseId)}{${urlCacheKey(code)}}`;
}

/** Drops the app's table, then closes the app. */
export async function closeAndDrop(app: NestFastifyApplication | undefined): Promise<void> {
  if (!app) return;
  await repositoryOf(app).dropTable();
  await app.close();
}

export const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `check` every 50 ms until it is true or `timeoutMs` passed; returns the last result. */
export async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await delay(50);
  }
}

/** A Nest logger that keeps every entry (all levels), for tests that check what is logged. */
export class CapturingLogger implements LoggerService {
  readonly entries: { level: LogLevel; message: string }[] = [];

  log(message: unknown) {
    this.add('log', message);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.add('error', [message, ...rest].join(' '));
  }
  warn(message: unknown) {
    this.add('warn', message);
  }
  debug(message: unknown) {
    this.add('debug', message);
  }
  verbose(message: unknown) {
    this.add('verbose', message);
  }

  private add(level: LogLevel, message: unknown) {
    this.entries.push({ level, message: String(message) });
  }
}
