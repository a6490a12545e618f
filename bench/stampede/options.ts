/*
 * The options of `npm run bench:stampede`: the scenarios, the numbers each one runs with, and
 * their defaults (main.ts makes a flag of each, in this order within numbers, lists, patterns).
 */
import { ALL_PATTERNS, LIBRARY_PATTERNS, PatternName } from './patterns';
import type { OtelTier, OtelVariant } from './otel-worker';

/** The variants `--otel` accepts (`none`, the baseline, is measured beside each anyway). */
export const OTEL_VARIANTS: readonly (OtelVariant | 'none')[] = [
  ...['none', 'api', 'sdk', 'sdk-sampled', 'sdk-metrics', 'sdk-als'],
] as const;
export const OTEL_TIERS: readonly OtelTier[] = ['store', 'l1'];

/** A pattern, in apps with the library's L1 (`+l1`) or without. */
export interface TierVariant {
  name: string;
  pattern: PatternName;
  l1: boolean;
}

/** `two-tier-xfetch` or `two-tier-xfetch+l1`; throws on an unknown pattern. */
export function parseVariant(text: string): TierVariant {
  const name = text.trim();
  const l1 = name.endsWith('+l1');
  const pattern = (l1 ? name.slice(0, -3) : name) as PatternName;
  if (!ALL_PATTERNS.includes(pattern))
    throw new Error(`unknown pattern ${pattern} in ${name}; known: ${ALL_PATTERNS.join(', ')}`);
  if (l1 && !(LIBRARY_PATTERNS as readonly string[]).includes(pattern))
    throw new Error(`${name}: +l1 turns on the library's L1, ${pattern} is bench-local`);
  return { name, pattern, l1 };
}

const GROUPS = {
  all: ['cliff', 'steady', 'snowstorm'],
  resilience: ['late-lock', 'stall', 'hotset', 'fanout', 'warnings'],
  tiers: ['l1-hotset', 'grace-failing', 'l1-stall'],
} as const;
/** The scenarios and their groups, in run order. */
export const SCENARIOS = [
  ...(['all', 'resilience', 'tiers'] as const),
  ...GROUPS.all,
  ...GROUPS.resilience,
  ...GROUPS.tiers,
  ...(['otel', 'batch'] as const),
];
export type Scenario = (typeof SCENARIOS)[number];

const patterns = (...p: PatternName[]) => p;

export const DEFAULT_OPTIONS = {
  /** A scenario or group, or several, comma-separated (`steady,warnings`). */
  scenario: 'all' as string,
  /** Busy-loop processes beside the whole run (--cpu-burn [n]). */
  cpuBurn: 0,
  // cliff (the article's settings); `instances` only with --scenario cliff
  instances: 1,
  rounds: 10,
  warmup: 1,
  ttlMs: 80,
  backendMs: 100,
  lockTtlMs: 5000,
  pollMs: 2,
  beta: 1,
  /** Scenario all: the extra multi-instance cliff run (0 or 1: none). */
  multiInstances: 4,
  cliffPatterns: patterns(
    'naive',
    'singleflight',
    'xfetch',
    'distlock-poll',
    'distlock',
    'two-tier',
  ),
  concurrency: [100, 500, 1000],
  multiConcurrency: [1000],
  // steady
  rate: 2000,
  durationMs: 5000,
  steadyTtlMs: 1000,
  steadyPatterns: patterns('singleflight', 'xfetch', 'xfetch-uncoalesced'),
  // snowstorm
  snowKeys: 1000,
  snowRate: 10_000,
  snowDurationMs: 3500,
  snowTtlMs: 1000,
  jitter: 0.1,
  windowMs: 10,
  /** The StampedeModule's operationTimeout and cooldown in every app (library defaults). */
  operationTimeoutMs: 500,
  cooldownMs: 1000,
  // late-lock
  latePauseMs: 1500,
  latePatterns: patterns('singleflight', 'distlock', 'two-tier', 'two-tier-xfetch'),
  // stall
  stallRate: 2000,
  stallKeys: 100,
  stallTtlMs: 1000,
  stallDurationMs: 6000,
  stallWarmupMs: 1000,
  stallPauseMs: 2000,
  stallMode: 'ALL' as 'ALL' | 'WRITE',
  stallPatterns: patterns('singleflight', 'two-tier', 'two-tier-xfetch'),
  // hotset
  hotsetKeys: 10_000,
  hotsetZipf: 1,
  hotsetRate: 5000,
  hotsetTtlMs: 2000,
  hotsetBackendMs: 10,
  hotsetDurationMs: 10_000,
  hotsetWarmupMs: 2000,
  hotsetProbeKeys: 1000,
  hotsetHotKeys: 100,
  hotsetInstances: 1,
  hotsetPatterns: patterns('singleflight', 'two-tier', 'two-tier-xfetch'),
  // fanout
  fanoutInstances: 3,
  fanoutKeys: 1000,
  fanoutZipf: 1,
  fanoutRate: 3000,
  fanoutTtlMs: 1000,
  fanoutBackendMs: 100,
  fanoutDurationMs: 10_000,
  fanoutWarmupMs: 1000,
  fanoutPatterns: patterns('singleflight', 'two-tier', 'two-tier-xfetch'),
  // warnings
  warnRate: 2000,
  warnKeys: 100,
  warnTtlMs: 1000,
  warnFailRate: 0.1,
  warnDurationMs: 5000,
  warnPatterns: patterns('singleflight', 'xfetch', 'two-tier-xfetch'),
  // l1-hotset (variants: a pattern, or pattern+l1 for apps with StampedeModule l1: true)
  l1HotsetInstances: 4,
  l1HotsetKeys: 10_000,
  l1HotsetZipf: 1,
  l1HotsetRate: 5000,
  l1HotsetTtlMs: 2000,
  l1HotsetBackendMs: 10,
  l1HotsetDurationMs: 10_000,
  l1HotsetWarmupMs: 2000,
  l1HotsetProbeKeys: 1000,
  l1HotsetHotKeys: 100,
  l1HotsetVariants: ['two-tier-xfetch', 'two-tier-xfetch+l1', 'bento-like'],
  // grace-failing
  graceMs: 10_000,
  graceBackoffMs: 1000,
  graceKeys: 100,
  graceRate: 2000,
  graceTtlMs: 500,
  graceFailRate: 0.1,
  graceDurationMs: 8000,
  gracePatterns: patterns('two-tier', 'two-tier-grace'),
  // l1-stall
  l1StallKeys: 100,
  l1StallRate: 2000,
  l1StallTtlMs: 10_000,
  l1StallDurationMs: 5000,
  l1StallPauseMs: 2000,
  l1StallVariants: ['two-tier-xfetch', 'two-tier-xfetch+l1'],
  // otel: what the OpenTelemetry instrumentation costs (otel.ts)
  otelVariants: ['api', 'sdk'] as (OtelVariant | 'none')[],
  otelTiers: [...OTEL_TIERS],
  otelKeys: 1000,
  otelZipf: 1,
  otelConcurrency: 64,
  otelWarmupMs: 1000,
  otelDurationMs: 4000,
  otelRounds: 3,
  otelSliceMs: 200,
  /** batch: rounds per row (batch.ts; 5 when not given). */
  batchRounds: undefined as number | undefined,
};

export type BenchOptions = typeof DEFAULT_OPTIONS & { redisUrl: string };

/** The options that start with `P`, without it: `group(o, 'hotset').ttlMs` is `o.hotsetTtlMs`. */
export type Group<P extends string> = {
  [
    K in keyof BenchOptions as K extends `${P}${infer R}` ? Uncapitalize<R> : never
  ]: BenchOptions[K];
};

export function group<P extends string>(o: BenchOptions, prefix: P): Group<P> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o))
    if (k.startsWith(prefix) && k !== prefix)
      out[k[prefix.length].toLowerCase() + k.slice(prefix.length + 1)] = v;
  return out as Group<P>;
}

/** The scenarios a --scenario value names (groups expanded), in run order. */
export function scenariosOf(value: string): Scenario[] {
  const wanted = new Set<Scenario>();
  for (const part of value.split(',')) {
    const name = part.trim() as Scenario;
    for (const s of (GROUPS as Partial<Record<Scenario, readonly Scenario[]>>)[name] ?? [name])
      wanted.add(s);
  }
  return SCENARIOS.filter((s) => wanted.has(s));
}
