/*
 * npm run bench:shortener -- [options]
 *
 *   --database-url postgres://postgres@127.0.0.1:5432/test   --pool 10
 *   --connections 20,50,100   --duration 10   --warmup 2   --hot-codes 10
 *   --stress-connections 500   --stress-duration 10
 *   --lifetime-ttl 2   --lifetime-duration 10
 *   --strategies sequence,hash,snowflake   --create-connections 50   --create-duration 10
 *   --hit-connections 100   --hit-duration 10   --hit-rounds 3
 *   --only hit-path,redirects,lifetime,creation   (default: all of them)
 *   --cpu-prof <dir>   write a V8 CPU profile of each hit-path server (one more run each) there
 *   --perf <dir>       the same with Linux perf (on-CPU samples only; needs perf and root or
 *                      kernel.perf_event_paranoid <= 1): the breakdown the docs quote
 *   --built      start dist/apps/demo-shortener/main.js
 *                (after `npm run build`) instead of src/main.ts via register-ts
 *   --json <file>
 *
 * Needs REDIS_URL (the npm script sets it through scripts/with-redis.js) and PostgreSQL.
 */
import { writeFileSync } from 'node:fs';
import { perfUnavailable } from './perf-profile';
import {
  DEFAULTS,
  runShortenerBench,
  Section,
  SECTIONS,
  ShortenerBenchOptions,
  Strategy,
} from './shortener-bench';

const NUMBER_FLAGS: Record<string, keyof ShortenerBenchOptions> = {
  '--pool': 'pool',
  '--duration': 'durationS',
  '--warmup': 'warmupS',
  '--hot-codes': 'hotCodes',
  '--stress-connections': 'stressConnections',
  '--stress-duration': 'stressDurationS',
  '--lifetime-ttl': 'lifetimeTtlS',
  '--lifetime-duration': 'lifetimeDurationS',
  '--create-connections': 'createConnections',
  '--create-duration': 'createDurationS',
  '--hit-connections': 'hitConnections',
  '--hit-duration': 'hitDurationS',
  '--hit-rounds': 'hitRounds',
};

function usage(message: string): never {
  process.stderr.write(
    `bench:shortener: ${message}\n(see the options at the top of bench/shortener/main.ts)\n`,
  );
  process.exit(2);
}

export function parseArgs(argv: string[]): {
  options: Partial<ShortenerBenchOptions>;
  json?: string;
} {
  const options: Record<string, unknown> = {};
  let json: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? usage(`${flag} needs a value`);
    if (flag === '--json') json = value();
    else if (flag === '--built') options.built = true;
    else if (flag === '--database-url') options.databaseUrl = value();
    else if (flag === '--cpu-prof') options.profile = { dir: value(), with: 'v8' };
    else if (flag === '--perf') {
      const unavailable = perfUnavailable();
      if (unavailable) usage(`--perf: ${unavailable}`);
      options.profile = { dir: value(), with: 'perf' };
    } else if (flag === '--only') {
      const list = value().split(',') as Section[];
      if (list.some((s) => !SECTIONS.includes(s))) usage(`--only takes ${SECTIONS.join(', ')}`);
      options.sections = list;
    } else if (flag === '--connections') {
      const list = value().split(',').map(Number);
      if (list.some((n) => !Number.isInteger(n) || n <= 0))
        usage('--connections needs positive integers, comma-separated');
      options.connections = list;
    } else if (flag === '--strategies') {
      const list = value().split(',') as Strategy[];
      if (list.some((s) => !['sequence', 'hash', 'snowflake'].includes(s)))
        usage('--strategies takes sequence, hash, snowflake');
      options.strategies = list;
    } else if (flag in NUMBER_FLAGS) {
      const n = Number(value());
      if (!Number.isFinite(n) || n < 0) usage(`${flag} needs a number`);
      options[NUMBER_FLAGS[flag]] = n;
    } else usage(`unknown option ${argv[i]}`);
  }
  return { options: options as Partial<ShortenerBenchOptions>, json };
}

async function main(): Promise<void> {
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl)
    usage(
      'REDIS_URL is not set: run it as `npm run bench:shortener` (scripts/with-redis.js sets it)',
    );
  const { options, json } = parseArgs(process.argv.slice(2));
  const report = await runShortenerBench({
    ...DEFAULTS,
    ...options,
    redisUrl,
    log: (line) => process.stdout.write(`${line}\n`),
  });
  if (json) {
    writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`\nraw numbers written to ${json}\n`);
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
