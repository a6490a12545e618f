/*
 * The options of `npm run bench:stampede`: the scenarios, the numbers each one runs with, and
 * their defaults (main.ts turns the flags into them).
 */
import { ALL_PATTERNS, LIBRARY_PATTERNS, PatternName } from './patterns';
import type { OtelTier, OtelVariant } from './otel-worker';

/** The variants `--otel` accepts (`none`, the baseline, is measured beside each anyway). */
export const OTEL_VARIANTS: readonly (OtelVariant | 'none')[] = [
  'none',
  'api',
  'sdk',
  'sdk-sampled',
  'sdk-metrics',
  'sdk-als',
];
export const DEFAULT_OTEL_VARIANTS: readonly OtelVariant[] = ['api', 'sdk'];
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

/** One scenario by name, or a group: `all` (the cliff, steady and snowstorm scenarios), `resilience`, `tiers` (their files'). */
export type Scenario =
  | 'all'
  | 'resilience'
  | 'tiers'
  | 'cliff'
  | 'steady'
  | 'snowstorm'
  | 'late-lock'
  | 'stall'
  | 'hotset'
  | 'fanout'
  | 'warnings'
  | 'l1-hotset'
  | 'grace-failing'
  | 'l1-stall'
  | 'otel'
  | 'batch';

export const SCENARIO_GROUPS: Record<string, Scenario[]> = {
  all: ['cliff', 'steady', 'snowstorm'],
  resilience: ['late-lock', 'stall', 'hotset', 'fanout', 'warnings'],
  tiers: ['l1-hotset', 'grace-failing', 'l1-stall'],
};
export const SCENARIOS: Scenario[] = [
  'all',
  'resilience',
  'tiers',
  'cliff',
  'steady',
  'snowstorm',
  'late-lock',
  'stall',
  'hotset',
  'fanout',
  'warnings',
  'l1-hotset',
  'grace-failing',
  'l1-stall',
  'otel',
  'batch',
];

export interface BenchOptions {
  redisUrl: string;
  /** A scenario or group, or several, comma-separated (`steady,warnings`). */
  scenario: Scenario | string;
  /** Busy-loop processes beside the whole run (--cpu-burn [n]). */
  cpuBurn: number;
  /** The StampedeModule's operationTimeout and cooldown in every app (library defaults). */
  operationTimeoutMs: number;
  cooldownMs: number;
  // cliff (the article's settings)
  cliffPatterns: PatternName[];
  concurrency: number[];
  rounds: number;
  warmup: number;
  ttlMs: number;
  backendMs: number;
  lockTtlMs: number;
  pollMs: number;
  beta: number;
  /** Instances of the cliff scenario (scenario cliff). */
  instances: number;
  /** Scenario all: the extra multi-instance cliff run (0 or 1: none). */
  multiInstances: number;
  multiConcurrency: number[];
  // steady
  steadyPatterns: PatternName[];
  rate: number;
  durationMs: number;
  steadyTtlMs: number;
  // snowstorm
  snowKeys: number;
  snowRate: number;
  snowDurationMs: number;
  snowTtlMs: number;
  jitter: number;
  windowMs: number;
  // late-lock
  latePatterns: PatternName[];
  latePauseMs: number;
  // stall
  stallPatterns: PatternName[];
  stallRate: number;
  stallKeys: number;
  stallTtlMs: number;
  stallDurationMs: number;
  stallWarmupMs: number;
  stallPauseMs: number;
  stallMode: 'ALL' | 'WRITE';
  // hotset
  hotsetPatterns: PatternName[];
  hotsetKeys: number;
  hotsetZipf: number;
  hotsetRate: number;
  hotsetTtlMs: number;
  hotsetBackendMs: number;
  hotsetDurationMs: number;
  hotsetWarmupMs: number;
  hotsetProbeKeys: number;
  hotsetHotKeys: number;
  hotsetInstances: number;
  // fanout
  fanoutPatterns: PatternName[];
  fanoutInstances: number;
  fanoutKeys: number;
  fanoutZipf: number;
  fanoutRate: number;
  fanoutTtlMs: number;
  fanoutBackendMs: number;
  fanoutDurationMs: number;
  fanoutWarmupMs: number;
  // warnings
  warnPatterns: PatternName[];
  warnKeys: number;
  warnRate: number;
  warnTtlMs: number;
  warnFailRate: number;
  warnDurationMs: number;
  // l1-hotset (variants: a pattern, or pattern+l1 for apps with StampedeModule l1: true)
  l1HotsetVariants: string[];
  l1HotsetInstances: number;
  l1HotsetKeys: number;
  l1HotsetZipf: number;
  l1HotsetRate: number;
  l1HotsetTtlMs: number;
  l1HotsetBackendMs: number;
  l1HotsetDurationMs: number;
  l1HotsetWarmupMs: number;
  l1HotsetProbeKeys: number;
  l1HotsetHotKeys: number;
  // grace-failing
  gracePatterns: PatternName[];
  graceKeys: number;
  graceRate: number;
  graceTtlMs: number;
  graceDurationMs: number;
  graceFailRate: number;
  graceMs: number;
  graceBackoffMs: number;
  // l1-stall
  l1StallVariants: string[];
  l1StallKeys: number;
  l1StallRate: number;
  l1StallTtlMs: number;
  l1StallDurationMs: number;
  l1StallPauseMs: number;
  // otel: what the OpenTelemetry instrumentation costs (otel.ts)
  otelVariants: (OtelVariant | 'none')[];
  otelTiers: OtelTier[];
  otelKeys: number;
  otelZipf: number;
  otelConcurrency: number;
  otelWarmupMs: number;
  otelDurationMs: number;
  otelSliceMs: number;
  otelRounds: number;
  /** batch: rounds per row (batch.ts). */
  batchRounds?: number;
}

export const DEFAULT_OPTIONS: Omit<BenchOptions, 'redisUrl'> = {
  scenario: 'all',
  cpuBurn: 0,
  operationTimeoutMs: 500,
  cooldownMs: 1000,
  cliffPatterns: ['naive', 'singleflight', 'xfetch', 'distlock-poll', 'distlock', 'two-tier'],
  concurrency: [100, 500, 1000],
  rounds: 10,
  warmup: 1,
  ttlMs: 80,
  backendMs: 100,
  lockTtlMs: 5000,
  pollMs: 2,
  beta: 1,
  instances: 1,
  multiInstances: 4,
  multiConcurrency: [1000],
  steadyPatterns: ['singleflight', 'xfetch', 'xfetch-uncoalesced'],
  rate: 2000,
  durationMs: 5000,
  steadyTtlMs: 1000,
  snowKeys: 1000,
  snowRate: 10_000,
  snowDurationMs: 3500,
  snowTtlMs: 1000,
  jitter: 0.1,
  windowMs: 10,
  latePatterns: ['singleflight', 'distlock', 'two-tier', 'two-tier-xfetch'],
  latePauseMs: 1500,
  stallPatterns: ['singleflight', 'two-tier', 'two-tier-xfetch'],
  stallRate: 2000,
  stallKeys: 100,
  stallTtlMs: 1000,
  stallDurationMs: 6000,
  stallWarmupMs: 1000,
  stallPauseMs: 2000,
  stallMode: 'ALL',
  hotsetPatterns: ['singleflight', 'two-tier', 'two-tier-xfetch'],
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
  fanoutPatterns: ['singleflight', 'two-tier', 'two-tier-xfetch'],
  fanoutInstances: 3,
  fanoutKeys: 1000,
  fanoutZipf: 1,
  fanoutRate: 3000,
  fanoutTtlMs: 1000,
  fanoutBackendMs: 100,
  fanoutDurationMs: 10_000,
  fanoutWarmupMs: 1000,
  warnPatterns: ['singleflight', 'xfetch', 'two-tier-xfetch'],
  warnKeys: 100,
  warnRate: 2000,
  warnTtlMs: 1000,
  warnFailRate: 0.1,
  warnDurationMs: 5000,
  l1HotsetVariants: ['two-tier-xfetch', 'two-tier-xfetch+l1', 'bento-like'],
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
  gracePatterns: ['two-tier', 'two-tier-grace'],
  graceKeys: 100,
  graceRate: 2000,
  graceTtlMs: 500,
  graceDurationMs: 8000,
  graceFailRate: 0.1,
  graceMs: 10_000,
  graceBackoffMs: 1000,
  l1StallVariants: ['two-tier-xfetch', 'two-tier-xfetch+l1'],
  l1StallKeys: 100,
  l1StallRate: 2000,
  l1StallTtlMs: 10_000,
  l1StallDurationMs: 5000,
  l1StallPauseMs: 2000,
  otelVariants: [...DEFAULT_OTEL_VARIANTS],
  otelTiers: [...OTEL_TIERS],
  otelKeys: 1000,
  otelZipf: 1,
  otelConcurrency: 64,
  otelWarmupMs: 1000,
  otelDurationMs: 4000,
  otelSliceMs: 200,
  otelRounds: 3,
};

/** The scenarios a --scenario value names (groups expanded), in run order. */
export function scenariosOf(value: string): Scenario[] {
  const wanted = new Set<Scenario>();
  for (const part of value.split(',')) {
    const name = part.trim() as Scenario;
    for (const s of SCENARIO_GROUPS[name] ?? [name]) wanted.add(s);
  }
  return SCENARIOS.filter((s) => wanted.has(s));
}
