import { Client } from 'pg';
import { AppProcess } from './support/app-process';
import { POSTGRES_URL, REDIS_URL, requirePostgres, runId } from './support/env';

/** A URL with a user and a password the local servers accept (Redis' default user is `nopass`; PostgreSQL trusts). */
function withCredentials(url: string, user: string, password: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = password;
  return u.href;
}

/**
 * The shortener logs where its Redis and its database are, at start-up and when either fails:
 * never with their passwords.
 */
describe('shortener: credentials never reach the logs', () => {
  const id = runId('redact');
  const table = `redact_${id}`;
  const redisPassword = `redis-pw-${id}`;
  const dbPassword = `db-pw-${id}`;
  let app: AppProcess | undefined;

  afterAll(async () => {
    await app?.stop();
    const admin = new Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    await admin.query(`DROP TABLE IF EXISTS ${table}, ${table}_meta`).catch(() => undefined);
    await admin.end();
  });

  it('the start-up line names the Redis and the database without their passwords', async () => {
    await requirePostgres();
    app = await AppProcess.start({
      REDIS_URL: withCredentials(REDIS_URL, 'default', redisPassword),
      REDIS_KEY_PREFIX: `${id}:`,
      DATABASE_URL: withCredentials(POSTGRES_URL, 'postgres', dbPassword),
      DATABASE_TABLE: table,
      PUBLIC_BASE_URL: 'http://sho.rt',
    });
    const deadline = Date.now() + 10_000;
    while (!app.log().includes('listening on') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const log = app.log();
    expect(log).toContain('listening on');
    expect(log).toContain(`cache ${new URL(REDIS_URL).protocol}//***@`);
    expect(log).toContain('database postgres://***@');
    expect(log).not.toContain(redisPassword);
    expect(log).not.toContain(dbPassword);
  }, 90_000);

  it('a start-up failure that quotes REDIS_URL prints it without the password', async () => {
    // Port 99999 is no port: the Redis client refuses the URL and the error quotes it.
    const failed = await AppProcess.start({
      REDIS_URL: `redis://default:${redisPassword}@127.0.0.1:99999`,
      PUBLIC_BASE_URL: 'http://sho.rt',
    }).then(
      async (started) => {
        await started.stop();
        return 'started';
      },
      (err: Error) => err.message,
    );
    expect(failed).toContain('redis://***@127.0.0.1:99999');
    expect(failed).not.toContain(redisPassword);
  }, 90_000);
});
