import { createPool, Pool, PoolConnection, ResultSetHeader, RowDataPacket } from 'mysql2/promise';
import type { DatabaseConfig } from '../config';
import {
  DATABASE_ID_ROW,
  InsertResult,
  newDatabaseId,
  toIso,
  UrlRecord,
  UrlRepository,
} from './url-repository';

interface Row extends RowDataPacket {
  code: string;
  url: string;
  created_at: Date;
}

function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: string })?.code === 'ER_DUP_ENTRY';
}

/**
 * MySQL or MariaDB through a mysql2 pool of `poolSize` connections. Each connection is set up
 * so that no statement waits long: `statementTimeoutMs` bounds lock waits (table and row
 * locks, whole seconds) and the run of a statement (MariaDB `max_statement_time`, MySQL
 * `max_execution_time`, which covers SELECTs only).
 */
export class MysqlUrlRepository implements UrlRepository {
  readonly kind = 'mysql';
  private readonly pool: Pool;
  private readonly table: string;
  private id?: string;

  constructor(
    database: Pick<
      DatabaseConfig,
      'url' | 'table' | 'poolSize' | 'statementTimeoutMs' | 'connectTimeoutMs'
    >,
  ) {
    this.table = database.table;
    const lockWaitS = Math.max(1, Math.ceil(database.statementTimeoutMs / 1000));
    this.pool = createPool({
      uri: database.url,
      connectionLimit: database.poolSize,
      timezone: 'Z',
      connectTimeout: database.connectTimeoutMs,
      supportBigNumbers: true,
      bigNumberStrings: true,
    });
    // A pooled connection that breaks emits 'error'. mysql2 itself listens only once per
    // connection (to drop it from the pool): a later 'error' event on the same connection (a
    // write after the loss) would be unhandled and end the process. This listener stays for
    // the connection's lifetime.
    this.pool.pool.on('connection', (connection) => {
      connection.on('error', () => undefined);
      // Queued before the first command of whoever asked for the connection.
      const ignore = () => undefined;
      connection.query(
        `SET SESSION lock_wait_timeout = ${lockWaitS}, innodb_lock_wait_timeout = ${lockWaitS}`,
        ignore,
      );
      connection.query(
        `SET SESSION max_statement_time = ${database.statementTimeoutMs / 1000}`,
        (err: unknown) => {
          // Not MariaDB: MySQL's own limit (SELECT statements only).
          if (err)
            connection.query(
              `SET SESSION max_execution_time = ${database.statementTimeoutMs}`,
              ignore,
            );
        },
      );
    });
  }

  get databaseId(): string {
    if (!this.id) throw new Error('MysqlUrlRepository: init() first');
    return this.id;
  }

  async init(): Promise<void> {
    await this.pool.query(`
      CREATE TABLE IF NOT EXISTS ${this.table} (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        code VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NULL UNIQUE,
        url TEXT NOT NULL,
        url_hash CHAR(64) CHARACTER SET ascii NOT NULL UNIQUE,
        created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
      )`);
    await this.pool.query(`
      CREATE TABLE IF NOT EXISTS ${this.table}_meta (
        name VARCHAR(32) CHARACTER SET ascii NOT NULL PRIMARY KEY,
        value TEXT NOT NULL
      )`);
    await this.pool.execute(`INSERT IGNORE INTO ${this.table}_meta (name, value) VALUES (?, ?)`, [
      DATABASE_ID_ROW,
      newDatabaseId(),
    ]);
    const [rows] = await this.pool.execute<RowDataPacket[]>(
      `SELECT value FROM ${this.table}_meta WHERE name = ?`,
      [DATABASE_ID_ROW],
    );
    this.id = String(rows[0].value);
  }

  async insertSequential(
    url: string,
    urlHash: string,
    encode: (id: bigint) => string,
  ): Promise<InsertResult> {
    const createdAt = new Date();
    let conn: PoolConnection | undefined;
    try {
      conn = await this.pool.getConnection();
      await conn.beginTransaction();
      const [inserted] = await conn.execute<ResultSetHeader>(
        `INSERT INTO ${this.table} (url, url_hash, created_at) VALUES (?, ?, ?)`,
        [url, urlHash, createdAt],
      );
      const code = encode(BigInt(inserted.insertId));
      await conn.execute(`UPDATE ${this.table} SET code = ? WHERE id = ?`, [
        code,
        String(inserted.insertId),
      ]);
      await conn.commit();
      return { record: { code, url, createdAt: createdAt.toISOString() } };
    } catch (err) {
      if (
        conn &&
        !(await conn.rollback().then(
          () => true,
          () => false,
        ))
      ) {
        // The connection is gone (or in an unknown state): never hand it out again.
        conn.destroy();
        conn = undefined;
      }
      if (isUniqueViolation(err)) return this.conflictOf(urlHash);
      throw err;
    } finally {
      conn?.release();
    }
  }

  async insertWithCode(code: string, url: string, urlHash: string): Promise<InsertResult> {
    const createdAt = new Date();
    try {
      await this.pool.execute(
        `INSERT INTO ${this.table} (code, url, url_hash, created_at) VALUES (?, ?, ?, ?)`,
        [code, url, urlHash, createdAt],
      );
      return { record: { code, url, createdAt: createdAt.toISOString() } };
    } catch (err) {
      if (isUniqueViolation(err)) return this.conflictOf(urlHash);
      throw err;
    }
  }

  async findByCode(code: string): Promise<UrlRecord | null> {
    const [rows] = await this.pool.execute<Row[]>(
      `SELECT code, url, created_at FROM ${this.table} WHERE code = ?`,
      [code],
    );
    return rows[0] ? toRecord(rows[0]) : null;
  }

  async findByUrlHash(urlHash: string): Promise<UrlRecord | null> {
    const [rows] = await this.pool.execute<Row[]>(
      `SELECT code, url, created_at FROM ${this.table} WHERE url_hash = ? AND code IS NOT NULL`,
      [urlHash],
    );
    return rows[0] ? toRecord(rows[0]) : null;
  }

  async codeExists(code: string): Promise<boolean> {
    const [rows] = await this.pool.execute<RowDataPacket[]>(
      `SELECT 1 FROM ${this.table} WHERE code = ?`,
      [code],
    );
    return rows.length > 0;
  }

  async recent(limit: number): Promise<UrlRecord[]> {
    // LIMIT as a literal: mysql2 sends execute() parameters as strings, which MySQL refuses there.
    const n = Math.max(0, Math.floor(limit));
    const [rows] = await this.pool.execute<Row[]>(
      `SELECT code, url, created_at FROM ${this.table} WHERE code IS NOT NULL ORDER BY id DESC LIMIT ${n}`,
    );
    return rows.map(toRecord);
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async dropTable(): Promise<void> {
    await this.pool.query(`DROP TABLE IF EXISTS ${this.table}, ${this.table}_meta`);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private async conflictOf(urlHash: string): Promise<InsertResult> {
    return { conflict: (await this.findByUrlHash(urlHash)) ? 'url-exists' : 'code-taken' };
  }
}

function toRecord(row: Row): UrlRecord {
  return { code: row.code, url: row.url, createdAt: toIso(row.created_at) };
}
