/*
 * npm run bench:stampede -- [options]
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
 *   batch:     getOrLoadMany against per-key getOrLoad, 100 keys (50 cached) on 1 and 2
 *              instances: Redis commands, round trips, loader calls (batch.ts; seconds)
 *              --batch-rounds 5
 *   --json <file>
 *
 * Needs REDIS_URL (the npm script sets it through scripts/with-redis.js); late-lock, stall,
 * hotset, fanout and the tiers scenarios also start a private redis-server (redis-server on PATH
 * or REDIS_SERVER_BIN).
 */
import { writeFileSync } from 'node:fs';
import type { PatternName } from './bench-app';
import { ALL_PATTERNS } from './bench-app';
import { BenchOptions, runStampedeBench, SCENARIOS, Scenario } from './stampede-bench';
import { parseVariant } from './tiers';
import { OTEL_TIERS, OTEL_VARIANTS } from './otel';

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

function usage(message: string): never {
  process.stderr.write(
    `bench:stampede: ${message}\n(see the options at the top of bench/stampede/main.ts)\n`,
  );
  process.exit(2);
}

export function parseArgs(argv: string[]): { options: Partial<BenchOptions>; json?: string } {
  const options: Record<string, unknown> = {};
  let json: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? usage(`${flag} needs a value`);
    if (flag === '--json') json = value();
    else if (flag === '--scenario') {
      const s = value();
      const unknown = s.split(',').filter((x) => !SCENARIOS.includes(x.trim() as Scenario));
      if (unknown.length)
        usage(`unknown scenario(s) ${unknown.join(', ')}; known: ${SCENARIOS.join(', ')}`);
      options.scenario = s;
    } else if (flag === '--cpu-burn') {
      // An optional count: `--cpu-burn`, `--cpu-burn 2`, `--cpu-burn=2`.
      const next = inline ?? argv[i + 1];
      if (next !== undefined && /^\d+$/.test(next)) {
        options.cpuBurn = Number(next);
        if (inline === undefined) i++;
      } else options.cpuBurn = 1;
    } else if (flag === '--otel' || flag === '--otel-tiers') {
      const known: readonly string[] = flag === '--otel' ? OTEL_VARIANTS : OTEL_TIERS;
      const list = value()
        .split(',')
        .map((v) => v.trim());
      const unknown = list.filter((v) => !known.includes(v));
      if (unknown.length || list.length === 0)
        usage(`${flag}: unknown ${unknown.join(', ')}; known: ${known.join(', ')}`);
      options[flag === '--otel' ? 'otelVariants' : 'otelTiers'] = list;
    } else if (flag === '--stall-mode') {
      const mode = value().toUpperCase();
      if (mode !== 'ALL' && mode !== 'WRITE') usage('--stall-mode is ALL or WRITE');
      options.stallMode = mode;
    } else if (flag in NUMBER_FLAGS) {
      const n = Number(value());
      if (!Number.isFinite(n) || n < 0) usage(`${flag} needs a number`);
      options[NUMBER_FLAGS[flag]] = n;
    } else if (flag in LIST_FLAGS) {
      const list = value().split(',').map(Number);
      if (list.some((n) => !Number.isInteger(n) || n <= 0))
        usage(`${flag} needs positive integers, comma-separated`);
      options[LIST_FLAGS[flag]] = list;
    } else if (flag in PATTERN_FLAGS) {
      const list = value().split(',') as PatternName[];
      const unknown = list.filter((p) => !ALL_PATTERNS.includes(p));
      if (unknown.length)
        usage(`unknown pattern(s) ${unknown.join(', ')}; known: ${ALL_PATTERNS.join(', ')}`);
      options[PATTERN_FLAGS[flag]] = list;
    } else if (flag in VARIANT_FLAGS) {
      const list = value().split(',');
      for (const v of list) {
        try {
          parseVariant(v);
        } catch (err) {
          usage(`${flag}: ${(err as Error).message}`);
        }
      }
      options[VARIANT_FLAGS[flag]] = list.map((v) => v.trim());
    } else usage(`unknown option ${argv[i]}`);
  }
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
  return { options: options as Partial<BenchOptions>, json };
}

async function main(): Promise<void> {
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl)
    usage(
      'REDIS_URL is not set: run it as `npm run bench:stampede` (scripts/with-redis.js sets it)',
    );
  const { options, json } = parseArgs(process.argv.slice(2));
  const report = await runStampedeBench({ ...options, redisUrl });
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
