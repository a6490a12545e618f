import Database from 'better-sqlite3';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createConnection } from 'mysql2/promise';
import { Client } from 'pg';
import {
  closeAndDrop,
  MYSQL_URL,
  POSTGRES_URL,
  requireMysql,
  requirePostgres,
  runId,
  startApp,
  tempSqlite,
  waitFor,
} from './support/env';
import { listen } from './support/http';

/** A database whose table another connection can lock, as a hung database would. */
interface LockableDatabase {
  url: string;
  /** Takes the lock from a connection of the test's own; resolves once it is held. */
  lock(table: string): Promise<void>;
  unlock(): Promise<void>;
  close(): Promise<void>;
  /** Requests that can wait on the lock (SQLite: only writes; readers of a WAL file never wait). */
  blocked: ('post' | 'get')[];
}

async function postgres(): Promise<LockableDatabase> {
  await requirePostgres();
  const admin = new Client({ connectionString: POSTGRES_URL });
  admin.on('error', () => undefined);
  await admin.connect();
  return {
    url: POSTGRES_URL,
    async lock(table) {
      await admin.query('BEGIN');
      await admin.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    },
    async unlock() {
      await admin.query('ROLLBACK');
    },
    close: () => admin.end(),
    blocked: ['post', 'get', 'post', 'get', 'post', 'get', 'post', 'get'],
  };
}

async function mysql(): Promise<LockableDatabase> {
  await requireMysql();
  const admin = await createConnection({ uri: MYSQL_URL });
  admin.on('error', () => undefined);
  return {
    url: MYSQL_URL,
    async lock(table) {
      await admin.query(`LOCK TABLES ${table} WRITE`);
    },
    async unlock() {
      await admin.query('UNLOCK TABLES');
    },
    close: () => admin.end(),
    blocked: ['post', 'get', 'post', 'get', 'post', 'get', 'post', 'get'],
  };
}

async function sqlite(): Promise<LockableDatabase> {
  const file = tempSqlite(runId('timeouts'));
  const admin: { db?: Database.Database } = {};
  return {
    url: file.url,
    async lock() {
      admin.db = new Database(file.url.slice('sqlite:'.length));
      admin.db.exec('BEGIN EXCLUSIVE');
    },
    async unlock() {
      admin.db?.exec('ROLLBACK');
      admin.db?.close();
      admin.db = undefined;
    },
    async close() {
      admin.db?.close();
      file.remove();
    },
    // better-sqlite3 waits synchronously (busy_timeout): two requests block this process 1 s each.
    blocked: ['post', 'post'],
  };
}

/**
 * A hung database (a table locked by another connection) costs each request at most about
 * DB_STATEMENT_TIMEOUT (plus DB_CONNECT_TIMEOUT when the pool is busy): the request gets a 503
 * instead of waiting for the whole fault, and requests succeed again once the lock is gone.
 */
describe.each([
  ['PostgreSQL', postgres],
  ['MySQL', mysql],
  ['SQLite', sqlite],
])('shortener: %s table locked by another connection', (_name, setup) => {
  const id = runId('timeouts');
  const table = `timeouts_${id}`;
  let db: LockableDatabase;
  let app: NestFastifyApplication | undefined;
  let base: string;
  let code: string;

  beforeAll(async () => {
    db = await setup();
    app = await startApp({
      DATABASE_URL: db.url,
      DATABASE_TABLE: table,
      DB_POOL_SIZE: '3',
      DB_STATEMENT_TIMEOUT: '1s',
      DB_CONNECT_TIMEOUT: '1s',
      // Every redirect reads the database.
      CACHE_ENABLED: 'false',
    });
    base = await listen(app);
    code = ((await (await post('https://example.com/before-the-lock')).json()) as { code: string })
      .code;
  }, 60_000);

  afterAll(async () => {
    await db?.unlock().catch(() => undefined);
    await closeAndDrop(app);
    await db?.close();
  }, 30_000);

  function post(url: string): Promise<Response> {
    return fetch(`${base}/urls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url }),
      signal: AbortSignal.timeout(10_000),
    });
  }

  const get = (path: string) =>
    fetch(`${base}${path}`, { redirect: 'manual', signal: AbortSignal.timeout(10_000) });

  it('answers 503 within a few seconds while the lock is held, and serves again after', async () => {
    await db.lock(table);
    let answers;
    try {
      const started = Date.now();
      answers = await Promise.all(
        db.blocked.map(async (kind, i) => {
          const res = await (kind === 'post'
            ? post(`https://example.com/${id}/during/${i}`)
            : get(`/${code}`));
          return {
            kind,
            status: res.status,
            message: ((await res.json()) as { message?: string }).message,
            ms: Date.now() - started,
          };
        }),
      );
    } finally {
      await db.unlock();
    }
    for (const answer of answers) {
      expect(answer).toEqual({
        kind: answer.kind,
        status: 503,
        message: expect.stringMatching(/database unavailable/i),
        ms: expect.any(Number),
      });
      // 1 s statement timeout, plus up to 1 s waiting for a pooled connection, plus a busy machine.
      expect(answer.ms).toBeLessThan(6000);
    }

    expect(
      await waitFor(
        async () => (await post(`https://example.com/${id}/after`)).status === 201,
        10_000,
      ),
    ).toBe(true);
    const redirect = await get(`/${code}`);
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('https://example.com/before-the-lock');
  }, 60_000);
});
