import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { InsertResult, UrlRecord, UrlRepository } from './url-repository';

interface Row {
  code: string;
  url: string;
  created_at: string;
}

function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: string })?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/**
 * SQLite file through better-sqlite3 (synchronous, so one query at a time per process: the
 * embedded default, fine for one instance). WAL mode lets several connections share the file.
 */
export class SqliteUrlRepository implements UrlRepository {
  readonly kind = 'sqlite';
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();

  /** `busyTimeoutMs`: longest wait for a lock held by another connection (then SQLITE_BUSY). */
  constructor(
    file: string,
    private readonly table: string,
    busyTimeoutMs: number,
  ) {
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma(`busy_timeout = ${Math.round(busyTimeoutMs)}`);
    this.db.pragma('synchronous = NORMAL');
  }

  /** Prepared once per SQL text (preparing is most of the cost of a small query). */
  private sql(text: string): Database.Statement {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.statements.set(text, statement);
    }
    return statement;
  }

  async init(): Promise<void> {
    const t = this.table;
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS ${t} (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        code TEXT UNIQUE,
        url TEXT NOT NULL,
        url_hash TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL
      )`);
  }

  async insertSequential(
    url: string,
    urlHash: string,
    encode: (id: bigint) => string,
  ): Promise<InsertResult> {
    const createdAt = new Date().toISOString();
    const insert = this.sql(
      `INSERT INTO ${this.table} (url, url_hash, created_at) VALUES (?, ?, ?)`,
    );
    const update = this.sql(`UPDATE ${this.table} SET code = ? WHERE id = ?`);
    try {
      return this.db.transaction(() => {
        const { lastInsertRowid } = insert.run(url, urlHash, createdAt);
        const code = encode(BigInt(lastInsertRowid));
        update.run(code, lastInsertRowid);
        return { record: { code, url, createdAt } };
      })();
    } catch (err) {
      if (isUniqueViolation(err)) {
        return { conflict: (await this.findByUrlHash(urlHash)) ? 'url-exists' : 'code-taken' };
      }
      throw err;
    }
  }

  async insertWithCode(code: string, url: string, urlHash: string): Promise<InsertResult> {
    const createdAt = new Date().toISOString();
    try {
      this.sql(
        `INSERT INTO ${this.table} (code, url, url_hash, created_at) VALUES (?, ?, ?, ?)`,
      ).run(code, url, urlHash, createdAt);
      return { record: { code, url, createdAt } };
    } catch (err) {
      if (isUniqueViolation(err)) {
        return { conflict: (await this.findByUrlHash(urlHash)) ? 'url-exists' : 'code-taken' };
      }
      throw err;
    }
  }

  async findByCode(code: string): Promise<UrlRecord | null> {
    const row = this.sql(`SELECT code, url, created_at FROM ${this.table} WHERE code = ?`).get(
      code,
    ) as Row | undefined;
    return row ? toRecord(row) : null;
  }

  async findByUrlHash(urlHash: string): Promise<UrlRecord | null> {
    const row = this.sql(
      `SELECT code, url, created_at FROM ${this.table} WHERE url_hash = ? AND code IS NOT NULL`,
    ).get(urlHash) as Row | undefined;
    return row ? toRecord(row) : null;
  }

  async codeExists(code: string): Promise<boolean> {
    return !!this.sql(`SELECT 1 FROM ${this.table} WHERE code = ?`).get(code);
  }

  async ping(): Promise<void> {
    this.sql('SELECT 1').get();
  }

  async dropTable(): Promise<void> {
    this.statements.clear();
    this.db.exec(`DROP TABLE IF EXISTS ${this.table}`);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

function toRecord(row: Row): UrlRecord {
  return { code: row.code, url: row.url, createdAt: row.created_at };
}
