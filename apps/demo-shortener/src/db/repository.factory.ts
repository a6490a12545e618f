import type { DatabaseConfig } from '../config';
import { MysqlUrlRepository } from './mysql-url.repository';
import { PostgresUrlRepository } from './postgres-url.repository';
import { SqliteUrlRepository } from './sqlite-url.repository';
import type { UrlRepository } from './url-repository';

/**
 * The adapter that DATABASE_URL names: `postgres://` / `postgresql://`, `mysql://` /
 * `mariadb://`, else SQLite (`sqlite:<file>`, `file:<file>`, `sqlite::memory:` or a bare path).
 */
export function createUrlRepository(database: DatabaseConfig): UrlRepository {
  const { url: databaseUrl, table } = database;
  const scheme = /^([a-z]+):/i.exec(databaseUrl)?.[1]?.toLowerCase();
  if (scheme === 'postgres' || scheme === 'postgresql') {
    return new PostgresUrlRepository(database);
  }
  if (scheme === 'mysql' || scheme === 'mariadb') {
    return new MysqlUrlRepository({
      ...database,
      url: databaseUrl.replace(/^mariadb:/i, 'mysql:'),
    });
  }
  if (scheme === 'sqlite' || scheme === 'file') {
    const file = databaseUrl.slice(scheme.length + 1).replace(/^\/\//, '');
    return new SqliteUrlRepository(file || ':memory:', table, database.statementTimeoutMs);
  }
  if (scheme && scheme.length > 1) {
    throw new Error(
      `DATABASE_URL scheme "${scheme}:" is not supported: use postgres://, mysql:// or sqlite:<file>`,
    );
  }
  return new SqliteUrlRepository(databaseUrl, table, database.statementTimeoutMs);
}
