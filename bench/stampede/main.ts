/*
 * npm run bench:stampede -- [options]   (--help lists them)
 *
 *   --scenario <name>[,<name>...]   default all. Groups: all = cliff (1 instance at every
 *                            concurrency, then --multi-instances at --multi-concurrency),
 *                            steady, snowstorm (about 1.5 min); resilience = late-lock, stall,
 *                            hotset, fanout, warnings (about 2.5 min); tiers = l1-hotset,
 *                            grace-failing, l1-stall (about 1.5 to 2 min). Or one by name.
 *   --cpu-burn [n]           n busy-loop processes (default 1) beside the whole run
 *   --op-timeout 500   --cooldown 1000   the StampedeModule's operationTimeout and cooldown
 *   --instances K            cliff (or hotset): K forked processes share the load (default 1)
 *   --concurrency 100,500,1000   --rounds 10   --warmup 1   --ttl 80   --backend 100
 *   --lock-ttl 5000   --poll 2   --beta 1   --patterns naive,singleflight,...
 *   --multi-instances 4   --multi-concurrency 1000
 *   --rate 2000   --duration 5000   --steady-ttl 1000   --steady-patterns ...
 *   --snow-keys 1000   --snow-rate 10000   --snow-duration 3500   --snow-ttl 1000   --jitter 0.1
 *   --window 10
 *   late-lock: --late-pause 1500   --late-patterns singleflight,distlock,two-tier,two-tier-xfetch
 *   stall:     --stall-rate 2000   --stall-keys 100   --stall-ttl 1000   --stall-duration 6000
 *              --stall-warmup 1000   --stall-pause 2000   --stall-mode ALL|WRITE   --stall-patterns ...
 *   hotset:    --hotset-keys 10000   --hotset-zipf 1   --hotset-rate 5000   --hotset-ttl 2000
 *              --hotset-backend 10   --hotset-duration 10000   --hotset-warmup 2000
 *              --hotset-probe-keys 1000   --hotset-hot-keys 100   --hotset-instances 1
 *              --hotset-patterns singleflight,two-tier,two-tier-xfetch
 *   fanout:    --fanout-instances 3   --fanout-keys 1000   --fanout-zipf 1   --fanout-rate 3000
 *              --fanout-ttl 1000   --fanout-backend 100   --fanout-duration 10000
 *              --fanout-warmup 1000   --fanout-patterns singleflight,two-tier,two-tier-xfetch
 *   warnings:  --warn-rate 2000   --warn-keys 100   --warn-ttl 1000   --warn-fail 0.1
 *              --warn-duration 5000   --warn-patterns singleflight,xfetch,two-tier-xfetch
 *   l1-hotset: --l1-hotset-variants two-tier-xfetch,two-tier-xfetch+l1,bento-like (+l1: the
 *              instances' StampedeModule gets l1: true)   --l1-hotset-instances 4
 *              --l1-hotset-keys 10000   --l1-hotset-zipf 1   --l1-hotset-rate 5000
 *              --l1-hotset-ttl 2000   --l1-hotset-backend 10   --l1-hotset-duration 10000
 *              --l1-hotset-warmup 2000   --l1-hotset-probe-keys 1000   --l1-hotset-hot-keys 100
 *   grace-failing: --grace-patterns two-tier,two-tier-grace   --grace 10000   --grace-backoff 1000
 *              --grace-keys 100   --grace-rate 2000   --grace-ttl 500   --grace-fail 0.1
 *              --grace-duration 8000
 *   l1-stall:  --l1-stall-variants two-tier-xfetch,two-tier-xfetch+l1   --l1-stall-keys 100
 *              --l1-stall-rate 2000   --l1-stall-ttl 10000   --l1-stall-duration 5000
 *              --l1-stall-pause 2000
 *   otel:      --otel api,sdk (each against telemetry off, side by side in one process: api =
 *              @opentelemetry/api without SDK; sdk = SDK MeterProvider + Prometheus exporter +
 *              tracer provider with a batch processor; also sdk-sampled, sdk-metrics, sdk-als)
 *              --otel-tiers store,l1   --otel-keys 1000   --otel-zipf 1   --otel-concurrency 64
 *              --otel-warmup 1000   --otel-duration 4000 (per app)   --otel-slice 200
 *              --otel-rounds 3   (--otel alone implies --scenario otel)
 *   --json <file>
 *
 * Needs REDIS_URL (the npm script sets it through scripts/with-redis.js); late-lock, stall,
 * hotset, fanout and the tiers scenarios also start a private redis-server (redis-server on PATH
 * or REDIS_SERVER_BIN).
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

const DESCRIPTION = `The cache-stampede benchmark: cliff, steady and snowstorm on REDIS_URL; the resilience and
tiers scenarios on a private redis-server (redis-server on PATH or REDIS_SERVER_BIN).`;

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
