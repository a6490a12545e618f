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
 *   id (auto-increment), code (unique), url, url_hash (SHA-256 of url, unique), created_at.
 */
export interface UrlRepository {
  /** 'sqlite' | 'postgres' | 'mysql': shown in health details. */
  readonly kind: string;
  /** Creates the table and its indexes if missing. */
  init(): Promise<void>;
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
  /** Resolves when the database answers a trivial query. */
  ping(): Promise<void>;
  /** Drops the table (tests and benchmarks clean up their own tables with it). */
  dropTable(): Promise<void>;
  close(): Promise<void>;
}

export function toIso(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  return new Date(String(value)).toISOString();
}
