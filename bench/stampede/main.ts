/*
 * npm run bench:stampede -- [options]   (--help lists them, generated from DEFAULT_OPTIONS)
 *
 * Needs REDIS_URL (the npm script sets it through scripts/with-redis.js); late-lock, stall,
 * hotset, fanout, the tiers scenarios and otel also start a private redis-server (redis-server on
 * PATH or REDIS_SERVER_BIN).
 */
import { writeFileSync } from 'node:fs';
import { cliOptions, OptionSpec, parseOptions, UsageError } from '../shared/args';
import { ALL_PATTERNS } from './patterns';
import {
  BenchOptions,
  DEFAULT_OPTIONS,
  OTEL_TIERS,
  OTEL_VARIANTS,
  parseVariant,
  SCENARIOS,
} from './options';
import { runStampedeBench } from './stampede-bench';

type Key = keyof typeof DEFAULT_OPTIONS;
const SPECIAL: Key[] = ['scenario', 'cpuBurn', 'stallMode', 'otelVariants', 'otelTiers'];
const RENAMED: Partial<Record<Key, string>> = {
  operationTimeoutMs: 'op-timeout',
  warnFailRate: 'warn-fail',
  graceFailRate: 'grace-fail',
  cliffPatterns: 'patterns',
  otelVariants: 'otel',
};
/** `snowDurationMs` -> `snow-duration`, `l1HotsetKeys` -> `l1-hotset-keys`. */
const flagOf = (key: Key) =>
  RENAMED[key] ?? key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`).replace(/-ms$/, '');

const shown = (key: Key): string => {
  const v = DEFAULT_OPTIONS[key];
  return ` (default ${Array.isArray(v) ? v.join(',') : String(v)})`;
};
const help = (key: Key) => `${key}${shown(key)}`;
/** The spec of a generated flag by its kind; --help lists them by kind, in this order. */
const KINDS = {
  number: (key: Key): OptionSpec => ({ type: 'number', min: 0, help: help(key) }),
  list: (key: Key): OptionSpec => ({ type: 'list', help: `${help(key)}; positive integers` }),
  pattern: (key: Key): OptionSpec => ({ type: 'list', choices: ALL_PATTERNS, help: help(key) }),
  variant: (key: Key): OptionSpec => ({
    type: 'list',
    help: `${help(key)}; a pattern, or pattern+l1 (its app's StampedeModule gets l1: true)`,
  }),
};
type Kind = keyof typeof KINDS;
const kindOf = (key: Key): Kind | undefined => {
  const v = DEFAULT_OPTIONS[key];
  if (SPECIAL.includes(key)) return undefined;
  if (key.endsWith('Patterns')) return 'pattern';
  if (key.endsWith('Variants')) return 'variant';
  return Array.isArray(v) ? 'list' : 'number';
};
const KEYS = Object.keys(DEFAULT_OPTIONS) as Key[];
const GENERATED = (Object.keys(KINDS) as Kind[]).flatMap((kind) =>
  KEYS.filter((k) => kindOf(k) === kind).map((key) => ({ key, kind, flag: flagOf(key) })),
);

/** Every flag; the help names the option each one sets. */
const SPEC: Record<string, OptionSpec> = {
  scenario: {
    type: 'list',
    choices: SCENARIOS,
    help: 'scenarios or groups: all = cliff, steady, snowstorm; resilience = late-lock, stall, hotset, fanout, warnings; tiers = l1-hotset, grace-failing, l1-stall (default all)',
  },
  'cpu-burn': {
    type: 'number',
    min: 0,
    help: 'n busy-loop processes beside the whole run (--cpu-burn alone: 1)',
    placeholder: '[n]',
  },
  'stall-mode': { type: 'string', help: `ALL or WRITE${shown('stallMode')}` },
  otel: {
    type: 'list',
    choices: OTEL_VARIANTS,
    help: `each against telemetry off, side by side in one process (alone: implies --scenario otel)${shown('otelVariants')}`,
  },
  'otel-tiers': { type: 'list', choices: OTEL_TIERS, help: help('otelTiers') },
  ...Object.fromEntries(GENERATED.map(({ key, kind, flag }) => [flag, KINDS[kind](key)])),
  json: { type: 'string', placeholder: '<file>', help: 'also write every number as JSON' },
};

const DESCRIPTION = `The cache-stampede benchmark. Scenarios (--scenario, default all):
  all         cliff (1 instance at every --concurrency, then --multi-instances at
              --multi-concurrency), steady, snowstorm (about 1.5 min)
  resilience  late-lock, stall, hotset, fanout, warnings (about 2.5 min)
  tiers       l1-hotset, grace-failing, l1-stall (about 1.5 to 2 min)
  otel        --otel api,sdk,... each against telemetry off (--otel alone implies --scenario otel)
  batch       getOrLoadMany against per-key getOrLoad, 100 keys (50 cached) on 1 and 2 instances:
              Redis commands, round trips, loader calls (seconds)
--instances K: cliff (or hotset, l1-hotset) with K forked processes sharing the load.
Each flag below sets the option it names (BenchOptions in bench/stampede/options.ts says what it
does). Needs REDIS_URL (npm run sets it); the resilience,
tiers and otel scenarios start a private redis-server (on PATH or REDIS_SERVER_BIN).`;

/** `--cpu-burn` takes an optional count: `--cpu-burn`, `--cpu-burn 2`, `--cpu-burn=2`. */
function withCpuBurnCount(argv: string[]): string[] {
  return argv.flatMap((arg, i) =>
    arg === '--cpu-burn' && !/^\d+$/.test(argv[i + 1] ?? '') ? [arg, '1'] : [arg],
  );
}

export function parseArgs(argv: string[]): { options: Partial<BenchOptions>; json?: string } {
  const v = parseOptions(SPEC, withCpuBurnCount(argv)) as Record<string, unknown>;
  const options: Record<string, unknown> = {};
  if (v.scenario !== undefined) options.scenario = (v.scenario as string[]).join(',');
  if (v['cpu-burn'] !== undefined) options.cpuBurn = v['cpu-burn'];
  if (v.otel !== undefined) options.otelVariants = v.otel;
  if (v['otel-tiers'] !== undefined) options.otelTiers = v['otel-tiers'];
  if (v['stall-mode'] !== undefined) {
    const mode = String(v['stall-mode']).toUpperCase();
    if (mode !== 'ALL' && mode !== 'WRITE') throw new UsageError('--stall-mode is ALL or WRITE');
    options.stallMode = mode;
  }
  for (const { key, kind, flag } of GENERATED) {
    const x = v[flag];
    if (x === undefined) continue;
    if (kind === 'list') {
      const list = (x as string[]).map(Number);
      if (list.some((n) => !Number.isInteger(n) || n <= 0))
        throw new UsageError(`--${flag} needs positive integers, comma-separated`);
      options[key] = list;
    } else if (kind === 'variant') {
      options[key] = (x as string[]).map((name) => {
        try {
          return parseVariant(name).name;
        } catch (err) {
          throw new UsageError(`--${flag}: ${(err as Error).message}`);
        }
      });
    } else options[key] = x;
  }
  if (options.otelVariants !== undefined && options.scenario === undefined)
    options.scenario = 'otel';
  if (options.instances !== undefined) {
    options.scenario ??= 'cliff';
    if (options.scenario === 'hotset') options.hotsetInstances ??= options.instances;
    if (options.scenario === 'l1-hotset') options.l1HotsetInstances ??= options.instances;
  }
  return { options: options as Partial<BenchOptions>, json: v.json as string | undefined };
}

async function main(): Promise<void> {
  const argv = withCpuBurnCount(process.argv.slice(2));
  cliOptions('npm run bench:stampede', DESCRIPTION, SPEC, argv); // --help, and bad input
  const { options, json } = parseArgs(argv);
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl)
    throw new Error(
      'REDIS_URL is not set: run it as `npm run bench:stampede` (scripts/with-redis.js sets it)',
    );
  const report = await runStampedeBench({ ...options, redisUrl });
  if (json) {
    writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(`\nraw numbers written to ${json}\n`);
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`npm run bench:stampede: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
