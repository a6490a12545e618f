import { createConnection } from 'mysql2/promise';
import { Client } from 'pg';
import { AppProcess } from './support/app-process';
import {
  MYSQL_URL,
  POSTGRES_URL,
  requireMysql,
  requirePostgres,
  runId,
  waitFor,
} from './support/env';

/** A database whose connections from the app under test can be killed from outside. */
interface KillableDatabase {
  /** DATABASE_URL for the app: its connections are the only ones `kill` ends. */
  databaseUrl: string;
  /** Ends the app's connections; resolves to how many were ended. */
  kill(): Promise<number>;
  /** Drops the app's tables and whatever the setup made; closes the admin connection. */
  cleanup(table: string): Promise<void>;
}

/** PostgreSQL: the app's backends carry a unique application_name; pg_terminate_backend ends them. */
async function postgres(id: string): Promise<KillableDatabase> {
  await requirePostgres();
  const applicationName = `shortener_${id}`;
  const admin = new Client({ connectionString: POSTGRES_URL, application_name: `admin_${id}` });
  admin.on('error', () => undefined);
  await admin.connect();
  const databaseUrl = new URL(POSTGRES_URL);
  databaseUrl.searchParams.set('application_name', applicationName);
  return {
    databaseUrl: databaseUrl.href,
    async kill() {
      const { rows } = await admin.query<{ ok: boolean }>(
        'SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1',
        [applicationName],
      );
      return rows.filter((r) => r.ok).length;
    },
    async cleanup(table) {
      await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_meta`).catch(() => undefined);
      await admin.end();
    },
  };
}

/** MySQL / MariaDB: the app connects as a user of its own; KILL CONNECTION ends its threads. */
async function mysql(id: string): Promise<KillableDatabase> {
  await requireMysql();
  const user = `sh_${id.slice(-8)}`;
  const admin = await createConnection({ uri: MYSQL_URL });
  admin.on('error', () => undefined);
  const database = new URL(MYSQL_URL).pathname.slice(1);
  await admin.query(`CREATE USER '${user}'@'%'`);
  await admin.query(`GRANT ALL ON \`${database}\`.* TO '${user}'@'%'`);
  const databaseUrl = new URL(MYSQL_URL);
  databaseUrl.username = user;
  databaseUrl.password = '';
  return {
    databaseUrl: databaseUrl.href,
    async kill() {
      const [rows] = await admin.query<{ ID: number }[] & import('mysql2').RowDataPacket[]>(
        'SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?',
        [user],
      );
      let killed = 0;
      for (const { ID } of rows) {
        killed += await admin.query(`KILL CONNECTION ${Number(ID)}`).then(
          () => 1,
          () => 0, // already gone
        );
      }
      return killed;
    },
    async cleanup(table) {
      await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_meta`).catch(() => undefined);
      await admin.query(`DROP USER IF EXISTS '${user}'@'%'`).catch(() => undefined);
      await admin.end();
    },
  };
}

/**
 * Database connections dropped under write load (POST /urls with the default `sequence`
 * strategy, a transaction per request): the process stays up, the requests that lost their
 * connection get a 503 that says the database is unavailable, and later requests succeed on
 * new connections. The app runs in a child process, so that a crash is observable.
 */
describe.each([
  ['PostgreSQL', postgres],
  ['MySQL', mysql],
])('shortener: %s connections killed during POST /urls', (_name, setup) => {
  const id = runId('connloss');
  const table = `connloss_${id}`;
  let db: KillableDatabase | undefined;
  let app: AppProcess | undefined;

  beforeAll(async () => {
    db = await setup(id);
    app = await AppProcess.start({
      DATABASE_URL: db.databaseUrl,
      DATABASE_TABLE: table,
      DB_POOL_SIZE: '5',
      CODE_STRATEGY: 'sequence',
      CACHE_ENABLED: 'false',
      PUBLIC_BASE_URL: 'http://sho.rt',
    });
  }, 90_000);

  afterAll(async () => {
    await app?.stop();
    await db?.cleanup(table);
  });

  const post = async (url: string) => {
    const res = await fetch(`${app!.baseUrl}/urls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url }),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, body: (await res.json()) as { message?: string } };
  };

  it('stays up, answers the affected requests 503 "database unavailable", and succeeds afterwards', async () => {
    const answers: { status: number; message?: string }[] = [];
    const networkErrors: string[] = [];
    let stop = false;
    let n = 0;
    const writer = async () => {
      while (!stop && app!.alive) {
        try {
          const { status, body } = await post(`https://example.com/${id}/${n++}`);
          answers.push({ status, message: body.message });
        } catch (err) {
          networkErrors.push(String((err as Error).cause ?? err));
        }
      }
    };
    const writers = Array.from({ length: 16 }, writer);

    // End the app's connections repeatedly while the writers run.
    let killed = 0;
    for (let round = 0; round < 8 && app!.alive; round++) {
      await waitFor(async () => answers.length > 20 * (round + 1) || !app!.alive, 20_000);
      killed += await db!.kill();
    }
    stop = true;
    await Promise.all(writers);
    if (!app!.alive || networkErrors.length > 0) {
      console.log(`app ${app!.exitInfo}; ${networkErrors.slice(0, 3).join('; ')}\n${app!.log()}`);
    }

    expect({ alive: app!.alive, exit: app!.exitInfo, networkErrors: networkErrors.length }).toEqual(
      { alive: true, exit: 'running', networkErrors: 0 },
    );
    expect(killed).toBeGreaterThan(0);
    const failed = answers.filter((a) => a.status !== 201);
    // Some requests were on a killed connection; every one of them says why, as a 503.
    expect(failed.length).toBeGreaterThan(0);
    for (const a of failed) {
      expect(a).toEqual({ status: 503, message: expect.stringMatching(/database unavailable/i) });
    }

    // The pool replaces the dropped connections: new requests succeed.
    expect(
      await waitFor(
        async () => (await post(`https://example.com/${id}/after`)).status < 300,
        15_000,
      ),
    ).toBe(true);
    for (let i = 0; i < 20; i++) {
      expect((await post(`https://example.com/${id}/later/${i}`)).status).toBe(201);
    }
  }, 120_000);
});
