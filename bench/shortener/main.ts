/*
 * npm run bench:shortener -- [options]   (--help lists them)
 *
 * Needs REDIS_URL (the npm script sets it through scripts/with-redis.js) and PostgreSQL.
 */
import { writeFileSync } from 'node:fs';
import { cliOptions, UsageError } from '../shared/args';
import { SPEC } from './options';
import { perfUnavailable } from './perf-profile';
import { runShortenerBench } from './shortener-bench';

async function main(): Promise<void> {
  const o = cliOptions(
    'npm run bench:shortener',
    'Redirects, their lifetime and code creation of the demo shortener; the hit path.',
    SPEC,
    process.argv.slice(2),
    (v) => {
      if (v.connections.map(Number).some((n) => !Number.isInteger(n) || n <= 0))
        throw new UsageError('--connections needs positive integers, comma-separated');
      const unavailable = v.perf !== undefined && perfUnavailable();
      if (unavailable) throw new UsageError(`--perf: ${unavailable}`);
    },
  );
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl)
    throw new Error(
      'REDIS_URL is not set: run it as `npm run bench:shortener` (scripts/with-redis.js sets it)',
    );
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const report = await runShortenerBench({ ...o, redisUrl, log });
  if (o.json) {
    writeFileSync(o.json, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`\nraw numbers written to ${o.json}\n`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
