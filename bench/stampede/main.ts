/*
 * npm run bench:stampede -- [options]   (--help lists them, generated from SPEC below)
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

const NUMBER_FLAGS: Record<string, keyof BenchOptions> = {
  '--instances': 'instances',
  '--rounds': 'rounds',
  '--warmup': 'warmup',
  '--ttl': 'ttlMs',
  '--backend': 'backendMs',
  '--lock-ttl': 'lockTtlMs',
  '--poll': 'pollMs',
  '--beta': 'beta',
  '--multi-instances': 'multiInstances',
  '--rate': 'rate',
  '--duration': 'durationMs',
  '--steady-ttl': 'steadyTtlMs',
  '--snow-keys': 'snowKeys',
  '--snow-rate': 'snowRate',
  '--snow-duration': 'snowDurationMs',
  '--snow-ttl': 'snowTtlMs',
  '--jitter': 'jitter',
  '--window': 'windowMs',
  '--op-timeout': 'operationTimeoutMs',
  '--cooldown': 'cooldownMs',
  '--late-pause': 'latePauseMs',
  '--stall-rate': 'stallRate',
  '--stall-keys': 'stallKeys',
  '--stall-ttl': 'stallTtlMs',
  '--stall-duration': 'stallDurationMs',
  '--stall-warmup': 'stallWarmupMs',
  '--stall-pause': 'stallPauseMs',
  '--hotset-keys': 'hotsetKeys',
  '--hotset-zipf': 'hotsetZipf',
  '--hotset-rate': 'hotsetRate',
  '--hotset-ttl': 'hotsetTtlMs',
  '--hotset-backend': 'hotsetBackendMs',
  '--hotset-duration': 'hotsetDurationMs',
  '--hotset-warmup': 'hotsetWarmupMs',
  '--hotset-probe-keys': 'hotsetProbeKeys',
  '--hotset-hot-keys': 'hotsetHotKeys',
  '--hotset-instances': 'hotsetInstances',
  '--fanout-instances': 'fanoutInstances',
  '--fanout-keys': 'fanoutKeys',
  '--fanout-zipf': 'fanoutZipf',
  '--fanout-rate': 'fanoutRate',
  '--fanout-ttl': 'fanoutTtlMs',
  '--fanout-backend': 'fanoutBackendMs',
  '--fanout-duration': 'fanoutDurationMs',
  '--fanout-warmup': 'fanoutWarmupMs',
  '--warn-rate': 'warnRate',
  '--warn-keys': 'warnKeys',
  '--warn-ttl': 'warnTtlMs',
  '--warn-fail': 'warnFailRate',
  '--warn-duration': 'warnDurationMs',
  '--l1-hotset-instances': 'l1HotsetInstances',
  '--l1-hotset-keys': 'l1HotsetKeys',
  '--l1-hotset-zipf': 'l1HotsetZipf',
  '--l1-hotset-rate': 'l1HotsetRate',
  '--l1-hotset-ttl': 'l1HotsetTtlMs',
  '--l1-hotset-backend': 'l1HotsetBackendMs',
  '--l1-hotset-duration': 'l1HotsetDurationMs',
  '--l1-hotset-warmup': 'l1HotsetWarmupMs',
  '--l1-hotset-probe-keys': 'l1HotsetProbeKeys',
  '--l1-hotset-hot-keys': 'l1HotsetHotKeys',
  '--grace': 'graceMs',
  '--grace-backoff': 'graceBackoffMs',
  '--grace-keys': 'graceKeys',
  '--grace-rate': 'graceRate',
  '--grace-ttl': 'graceTtlMs',
  '--grace-fail': 'graceFailRate',
  '--grace-duration': 'graceDurationMs',
  '--l1-stall-keys': 'l1StallKeys',
  '--l1-stall-rate': 'l1StallRate',
  '--l1-stall-ttl': 'l1StallTtlMs',
  '--l1-stall-duration': 'l1StallDurationMs',
  '--l1-stall-pause': 'l1StallPauseMs',
  '--otel-keys': 'otelKeys',
  '--otel-zipf': 'otelZipf',
  '--otel-concurrency': 'otelConcurrency',
  '--otel-warmup': 'otelWarmupMs',
  '--otel-duration': 'otelDurationMs',
  '--otel-rounds': 'otelRounds',
  '--otel-slice': 'otelSliceMs',
  '--batch-rounds': 'batchRounds',
};
const LIST_FLAGS: Record<string, keyof BenchOptions> = {
  '--concurrency': 'concurrency',
  '--multi-concurrency': 'multiConcurrency',
};
const PATTERN_FLAGS: Record<string, keyof BenchOptions> = {
  '--patterns': 'cliffPatterns',
  '--steady-patterns': 'steadyPatterns',
  '--late-patterns': 'latePatterns',
  '--stall-patterns': 'stallPatterns',
  '--hotset-patterns': 'hotsetPatterns',
  '--fanout-patterns': 'fanoutPatterns',
  '--warn-patterns': 'warnPatterns',
  '--grace-patterns': 'gracePatterns',
};
/** Lists of variants: a pattern, or pattern+l1 (its app's StampedeModule gets l1: true). */
const VARIANT_FLAGS: Record<string, keyof BenchOptions> = {
  '--l1-hotset-variants': 'l1HotsetVariants',
  '--l1-stall-variants': 'l1StallVariants',
};

const shown = (key: keyof BenchOptions): string => {
  const v = DEFAULT_OPTIONS[key as Exclude<keyof BenchOptions, 'redisUrl'>];
  return ` (default ${Array.isArray(v) ? v.join(',') : String(v)})`;
};
const help = (key: keyof BenchOptions) => `${key}${shown(key)}`;
const entries = (
  flags: Record<string, keyof BenchOptions>,
  spec: (key: keyof BenchOptions) => OptionSpec,
) => Object.entries(flags).map(([flag, key]) => [flag.slice(2), spec(key)] as const);

/** Every flag, generated from the tables above; the help names the option each one sets. */
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
  ...Object.fromEntries([
    ...entries(NUMBER_FLAGS, (key) => ({ type: 'number', min: 0, help: help(key) })),
    ...entries(LIST_FLAGS, (key) => ({ type: 'list', help: `${help(key)}; positive integers` })),
    ...entries(PATTERN_FLAGS, (key) => ({ type: 'list', choices: ALL_PATTERNS, help: help(key) })),
    ...entries(VARIANT_FLAGS, (key) => ({
      type: 'list',
      help: `${help(key)}; a pattern, or pattern+l1 (its app's StampedeModule gets l1: true)`,
    })),
  ]),
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
  const set = (
    flags: Record<string, keyof BenchOptions>,
    f: (x: unknown, flag: string) => unknown,
  ) => {
    for (const [flag, key] of Object.entries(flags))
      if (v[flag.slice(2)] !== undefined) options[key] = f(v[flag.slice(2)], flag);
  };
  if (v.scenario !== undefined) options.scenario = (v.scenario as string[]).join(',');
  if (v['cpu-burn'] !== undefined) options.cpuBurn = v['cpu-burn'];
  if (v.otel !== undefined) options.otelVariants = v.otel;
  if (v['otel-tiers'] !== undefined) options.otelTiers = v['otel-tiers'];
  if (v['stall-mode'] !== undefined) {
    const mode = String(v['stall-mode']).toUpperCase();
    if (mode !== 'ALL' && mode !== 'WRITE') throw new UsageError('--stall-mode is ALL or WRITE');
    options.stallMode = mode;
  }
  set(NUMBER_FLAGS, (x) => x);
  set(LIST_FLAGS, (x, flag) => {
    const list = (x as string[]).map(Number);
    if (list.some((n) => !Number.isInteger(n) || n <= 0))
      throw new UsageError(`${flag} needs positive integers, comma-separated`);
    return list;
  });
  set(PATTERN_FLAGS, (x) => x);
  set(VARIANT_FLAGS, (x, flag) =>
    (x as string[]).map((name) => {
      try {
        return parseVariant(name).name;
      } catch (err) {
        throw new UsageError(`${flag}: ${(err as Error).message}`);
      }
    }),
  );
  if (options.otelVariants !== undefined && options.scenario === undefined) {
    options.scenario = 'otel';
  }
  if (options.instances !== undefined) {
    if (options.scenario === undefined) options.scenario = 'cliff';
    if (options.scenario === 'hotset' && options.hotsetInstances === undefined)
      options.hotsetInstances = options.instances;
    if (options.scenario === 'l1-hotset' && options.l1HotsetInstances === undefined)
      options.l1HotsetInstances = options.instances;
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
