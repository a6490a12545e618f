import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = join(__dirname, '..', '..');

describe('README examples run as written', () => {
  jest.setTimeout(60_000);

  it('examples/stampede-quickstart.ts: 1000 concurrent calls make one database query', async () => {
    const { stdout } = await run(
      process.execPath,
      ['-r', './scripts/register-ts.js', 'examples/stampede-quickstart.ts'],
      {
        cwd: root,
        env: { ...process.env, REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
      },
    );
    expect(stdout).toContain(
      '1000 concurrent calls -> 1 database query, value: {"id":42,"name":"product 42"}',
    );
    expect(stdout).toContain('after countByCategory twice -> 2 database queries');
    expect(stdout).toContain('getOrLoad -> 1.08');
    expect(stdout).toMatch(
      /health: \{ cache: \{ store: 'redis', latencyMs: \d+, status: 'up' \} \}/,
    );
  });

  it('examples/stampede-named.ts: two configurations and a namespace in one app', async () => {
    const { stdout } = await run(
      process.execPath,
      ['-r', './scripts/register-ts.js', 'examples/stampede-named.ts'],
      {
        cwd: root,
        env: { ...process.env, REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
      },
    );
    expect(stdout).toContain('product and session, twice each -> 2 database queries');
    expect(stdout).toContain('after logout -> 3 database queries');
    expect(stdout).toContain('billing total -> 42');
    expect(stdout).toContain('health entries: stampede, stampede:sessions');
  });
});
