/*
 * npm run bench:shortener -- [options]   (--help lists them)
 *
 * Needs REDIS_URL (the npm script sets it through scripts/with-redis.js) and PostgreSQL.
 */
import { writeFileSync } from 'node:fs';
import { cliOptions, parseOptions, Spec, UsageError, Values } from '../shared/args';
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

const SPEC = {
  'database-url': {
    type: 'string',
    default: DEFAULTS.databaseUrl,
    placeholder: '<url>',
    help: 'PostgreSQL',
  },
  connections: {
    type: 'list',
    default: DEFAULTS.connections.map(String),
    help: 'redirects: autocannon connections per row, positive integers',
  },
  strategies: {
    type: 'list',
    choices: ['sequence', 'hash', 'snowflake'],
    default: DEFAULTS.strategies,
    help: 'creation: code strategies',
  },
  only: { type: 'list', choices: SECTIONS, default: SECTIONS, help: 'the sections to run' },
  ...Object.fromEntries(
    Object.entries(NUMBER_FLAGS).map(([flag, key]) => [
      flag.slice(2),
      {
        type: 'number',
        min: 0,
        default: DEFAULTS[key as keyof typeof DEFAULTS] as number,
        help: key,
      },
    ]),
  ),
  'cpu-prof': {
    type: 'string',
    placeholder: '<dir>',
    help: 'write a V8 CPU profile of each hit-path server (one more run each) there',
  },
  perf: {
    type: 'string',
    placeholder: '<dir>',
    help: 'the same with Linux perf (on-CPU samples only; needs perf and root or kernel.perf_event_paranoid <= 1): the breakdown the docs quote',
  },
  built: {
    type: 'boolean',
    help: 'start dist/apps/demo-shortener/main.js (after `npm run build`) instead of src/main.ts via register-ts',
  },
  json: { type: 'string', placeholder: '<file>', help: 'also write every number as JSON' },
} satisfies Spec;

export function parseArgs(argv: string[]): {
  options: Partial<ShortenerBenchOptions>;
  json?: string;
} {
  const v = parseOptions(SPEC, argv) as Record<string, unknown> & Values<typeof SPEC>;
  const options: Partial<ShortenerBenchOptions> = {};
  for (const [flag, key] of Object.entries(NUMBER_FLAGS))
    (options as Record<string, unknown>)[key] = v[flag.slice(2)];
  if (v.built) options.built = true;
  options.databaseUrl = v['database-url'];
  options.sections = v.only as Section[];
  options.strategies = v.strategies as Strategy[];
  options.connections = v.connections.map(Number);
  if (options.connections.some((n) => !Number.isInteger(n) || n <= 0))
    throw new UsageError('--connections needs positive integers, comma-separated');
  if (v['cpu-prof'] !== undefined) options.profile = { dir: v['cpu-prof'], with: 'v8' };
  if (v.perf !== undefined) {
    const unavailable = perfUnavailable();
    if (unavailable) throw new UsageError(`--perf: ${unavailable}`);
    options.profile = { dir: v.perf, with: 'perf' };
  }
  return { options, json: v.json };
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  cliOptions(
    'npm run bench:shortener',
    'Redirects, their lifetime and code creation of the demo shortener; the hit path.',
    SPEC,
    argv,
  ); // --help, and bad input
  const { options, json } = parseArgs(argv);
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl)
    throw new Error(
      'REDIS_URL is not set: run it as `npm run bench:shortener` (scripts/with-redis.js sets it)',
    );
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
    if (err instanceof UsageError) {
      process.stderr.write(`npm run bench:shortener: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
