import { randomBytes } from 'node:crypto';

/** One short URL as stored. */
export interface UrlRecord {
  code: string;
  url: string;
  /** ISO 8601, UTC. */
  createdAt: string;
}

/** What an insert ran into instead of storing the row. */
export type InsertConflict = 'code-taken' | 'url-exists';

export type InsertResult = { record: UrlRecord } | { conflict: InsertConflict };

/**
 * The source of truth, as the shortener needs it. Adapters: SQLite (better-sqlite3),
 * PostgreSQL (pg Pool), MySQL/MariaDB (mysql2 pool). One table:
 *   id (auto-increment), code (unique), url, url_hash (SHA-256 of url, unique), created_at;
 * and `<table>_meta` (name, value) beside it, which holds the database's identity.
 */
export interface UrlRepository {
  /** 'sqlite' | 'postgres' | 'mysql': shown in health details. */
  readonly kind: string;
  /** Creates the tables and indexes if missing, and the database identity with them. */
  init(): Promise<void>;
  /**
   * A random id made when the tables were created (after init()): a database created anew
   * gets another one, although its codes start again at 1. Cache keys carry it, so entries
   * cached for the old database are never read for the new one.
   */
  readonly databaseId: string;
  /** Sequence + Base62: INSERT, code = encode(new id), UPDATE, in one transaction. */
  insertSequential(
    url: string,
    urlHash: string,
    encode: (id: bigint) => string,
  ): Promise<InsertResult>;
  /** One INSERT with a code made by the app (hash, Snowflake). */
  insertWithCode(code: string, url: string, urlHash: string): Promise<InsertResult>;
  findByCode(code: string): Promise<UrlRecord | null>;
  findByUrlHash(urlHash: string): Promise<UrlRecord | null>;
  codeExists(code: string): Promise<boolean>;
  /** The `limit` records created last, newest first (the page's "recent links"). */
  recent(limit: number): Promise<UrlRecord[]>;
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  /** Drops the tables (tests and benchmarks clean up their own tables with it). */
  dropTable(): Promise<void>;
  close(): Promise<void>;
}

export function toIso(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  return new Date(String(value)).toISOString();
}

/** Name of the row of `<table>_meta` that holds the database identity. */
export const DATABASE_ID_ROW = 'database_id';

/** A new database identity: 48 random bits, hex. */
export function newDatabaseId(): string {
  return randomBytes(6).toString('hex');
}
