import Database from 'better-sqlite3';
import { mkdirSync, Stats, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseUnavailableError } from './database.errors';
import {
  DATABASE_ID_ROW,
  InsertResult,
  newDatabaseId,
  UrlRecord,
  UrlRepository,
} from './url-repository';

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
 *
 * A file deleted (or replaced) while the app runs stays readable through the open handle, but
 * nothing written to it will be seen again, and a restart creates an empty database whose codes
 * start at 1 again. So the file at the path is checked to be the one opened: before each write
 * and on each health check; writes then fail with DatabaseUnavailableError (503).
 */
export class SqliteUrlRepository implements UrlRepository {
  readonly kind = 'sqlite';
  private readonly db: Database.Database;
  private readonly statements = new Map<string, Database.Statement>();
  /** The file opened (undefined for :memory:). */
  private readonly opened?: { path: string; stats: Stats };
  private id?: string;

  /** `busyTimeoutMs`: longest wait for a lock held by another connection (then SQLITE_BUSY). */
  constructor(
    file: string,
    private readonly table: string,
    busyTimeoutMs: number,
  ) {
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
    this.db = new Database(file);
    if (file !== ':memory:') this.opened = { path: file, stats: statSync(file) };
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

  get databaseId(): string {
    if (!this.id) throw new Error('SqliteUrlRepository: init() first');
    return this.id;
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
      );
      CREATE TABLE IF NOT EXISTS ${t}_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)`);
    this.sql(`INSERT OR IGNORE INTO ${t}_meta (name, value) VALUES (?, ?)`).run(
      DATABASE_ID_ROW,
      newDatabaseId(),
    );
    this.id = (
      this.sql(`SELECT value FROM ${t}_meta WHERE name = ?`).get(DATABASE_ID_ROW) as {
        value: string;
      }
    ).value;
  }

  /** Throws DatabaseUnavailableError when the file at the path is not the one opened any more. */
  private assertFileIsOurs(): void {
    if (!this.opened) return;
    const { path, stats } = this.opened;
    let now: Stats | undefined;
    try {
      now = statSync(path);
    } catch {
      // gone
    }
    if (!now || now.ino !== stats.ino || now.dev !== stats.dev) {
      throw new DatabaseUnavailableError(
        `the SQLite file ${path} was deleted or replaced while the app ran: writes are refused ` +
          '(they would be lost); restore the file, or restart the app to use the file now at that path',
      );
    }
  }

  async insertSequential(
    url: string,
    urlHash: string,
    encode: (id: bigint) => string,
  ): Promise<InsertResult> {
    this.assertFileIsOurs();
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
    this.assertFileIsOurs();
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

  async recent(limit: number): Promise<UrlRecord[]> {
    const rows = this.sql(
      `SELECT code, url, created_at FROM ${this.table} WHERE code IS NOT NULL ORDER BY id DESC LIMIT ?`,
    ).all(limit) as Row[];
    return rows.map(toRecord);
  }

  async ping(): Promise<void> {
    this.assertFileIsOurs();
    this.sql('SELECT 1').get();
  }

  async dropTable(): Promise<void> {
    this.statements.clear();
    this.db.exec(`DROP TABLE IF EXISTS ${this.table}; DROP TABLE IF EXISTS ${this.table}_meta`);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

function toRecord(row: Row): UrlRecord {
  return { code: row.code, url: row.url, createdAt: row.created_at };
}
