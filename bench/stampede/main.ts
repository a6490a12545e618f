/*
 * npm run bench:stampede -- [options]
 *
 *   --scenario all|cliff|steady|snowstorm   default all: cliff on 1 instance at every
 *                                           concurrency, cliff on --multi-instances at
 *                                           --multi-concurrency, steady, snowstorm
 *   --instances K            cliff only: K forked processes share the concurrency (default 1)
 *   --concurrency 100,500,1000   --rounds 10   --warmup 1   --ttl 80   --backend 100
 *   --lock-ttl 5000   --poll 2   --beta 1   --patterns naive,singleflight,...
 *   --multi-instances 4   --multi-concurrency 1000
 *   --rate 2000   --duration 5000   --steady-ttl 1000   --steady-patterns ...
 *   --snow-keys 1000   --snow-rate 10000   --snow-duration 3500   --snow-ttl 1000   --jitter 0.1
 *   --window 10   --json <file>
 *
 * Needs REDIS_URL (the npm script sets it through scripts/with-redis.js).
 */
import { writeFileSync } from 'node:fs';
import type { PatternName } from './bench-app';
import { ALL_PATTERNS } from './bench-app';
import { BenchOptions, runStampedeBench, Scenario } from './stampede-bench';

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
};
const LIST_FLAGS: Record<string, keyof BenchOptions> = {
  '--concurrency': 'concurrency',
  '--multi-concurrency': 'multiConcurrency',
};
const PATTERN_FLAGS: Record<string, keyof BenchOptions> = {
  '--patterns': 'cliffPatterns',
  '--steady-patterns': 'steadyPatterns',
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
      if (!['all', 'cliff', 'steady', 'snowstorm'].includes(s)) usage(`unknown scenario ${s}`);
      options.scenario = s as Scenario;
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
    } else usage(`unknown option ${argv[i]}`);
  }
  if (options.instances !== undefined && options.scenario === undefined) options.scenario = 'cliff';
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
