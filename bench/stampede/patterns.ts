/*
 * The benchmark's patterns by name, the config of an app instance, the counters of a pattern, and
 * the Redis key names the library uses: plain data shared by the app, the workers and the
 * scenarios.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { StampedeModuleOptions } from '@nest-redis-resilience/stampede';

export const LIBRARY_PATTERNS = [
  'naive',
  'singleflight',
  'xfetch',
  'distlock',
  'two-tier',
  'two-tier-xfetch',
  'two-tier-grace',
  'jitter',
] as const;
export const LOCAL_PATTERNS = ['distlock-poll', 'xfetch-uncoalesced', 'bento-like'] as const;
export type PatternName = (typeof LIBRARY_PATTERNS)[number] | (typeof LOCAL_PATTERNS)[number];
export const ALL_PATTERNS: PatternName[] = [...LIBRARY_PATTERNS, ...LOCAL_PATTERNS];

/**
 * StampedeModule options an instance adds to its forRoot() (JSON only: forked instances get them
 * through BENCH_CONFIG), for instance `{ l1: true }`.
 */
export type BenchModuleOptions = Pick<
  StampedeModuleOptions,
  'l1' | 'defaultTtl' | 'connectTimeout' | 'operationTimeout' | 'cooldown'
>;

/** Entries of the bench-local `bento-like` L1 (the library's `l1: true` default). */
export const BENTO_L1_ENTRIES = 10_000;

export interface BenchConfig {
  redisUrl: string;
  /** Every key of the run starts with it (library values, locks, bench-local keys). */
  prefix: string;
  ttlMs: number;
  backendMs: number;
  lockTtlMs: number;
  pollMs: number;
  beta: number;
  jitter: number;
  /** Record the time of every loader call (snowstorm). */
  recordLoadTimes?: boolean;
  /** Record the key and start time of every loader call (double refreshes, loads per key). */
  recordLoads?: boolean;
  /** Share of loader calls that throw (after the backend time), 0 to 1 (warnings scenario). */
  failRate?: number;
  /** StampedeModule operationTimeout (ms); the library's default when absent. */
  operationTimeout?: number;
  /** StampedeModule cooldown (ms); the library's default when absent. */
  cooldown?: number;
  /** More StampedeModule options (the tiers scenarios: `{ l1: true }`). */
  moduleOptions?: BenchModuleOptions;
  /** `two-tier-grace`: @Cacheable grace and graceBackoff (ms); default 10 s and the library's. */
  graceMs?: number;
  graceBackoffMs?: number;
}

/** Counters for one pattern, read before and after a round. */
export interface PatternCounters {
  /** Loader (backend) calls. */
  loads: number;
  /** Calls that had to wait for a loader (no cached value, or the caller recomputed itself). */
  misses: number;
  /** Total ms callers spent waiting for a lock held by someone else. */
  lockWaitMs: number;
  earlyRecomputes: number;
  storeErrors: number;
  /** Library metrics (0 for the bench-local patterns). */
  calls: number;
  hits: number;
  joins: number;
  lockWaits: number;
  lockTimeouts: number;
  /** Loader errors. */
  errors: number;
  /** Hits served by the in-process tier (library L1, or bento-like's own LRU). */
  l1Hits: number;
  /** Stale values served within grace (or while an early recomputation ran). */
  staleServes: number;
  /** Failed refreshes within grace whose callers kept the stale value. */
  failSafes: number;
}

export function emptyCounters(): PatternCounters {
  return {
    loads: 0,
    misses: 0,
    lockWaitMs: 0,
    earlyRecomputes: 0,
    storeErrors: 0,
    calls: 0,
    hits: 0,
    joins: 0,
    lockWaits: 0,
    lockTimeouts: 0,
    errors: 0,
    l1Hits: 0,
    staleServes: 0,
    failSafes: 0,
  };
}

/** One loader call: which key, when it started (performance.now() of its process). */
export interface LoadRecord {
  key: string;
  at: number;
}

/** Error thrown by a failing load (failRate); `id` tells the bench which load it came from. */
export class BackendError extends Error {
  constructor(readonly id: number) {
    super(`backend failure #${id}`);
  }
}

/**
 * What one caller's call did, recorded through AsyncLocalStorage (load jobs with `classify`):
 * the end of a loader call that ran in its async context, and whether it met another holder's
 * lock (BenchApp.watchLockWaits). A call that ran the loader itself has loadEnd set when it
 * resolves; an XFetch or grace refresh that it started in the background ends after the call
 * has returned, so that call is still a hit.
 */
export interface CallRecord {
  loadEnd?: number;
  /** A lock step of the call found another holder's lock (it waited for that load). */
  lockWait?: boolean;
}

export const callContext = new AsyncLocalStorage<CallRecord>();

export function valueKey(prefix: string, key: string): string {
  return `${prefix}{${key}}`;
}

export function lockKey(prefix: string, key: string): string {
  return `${prefix}{${key}}:lock`;
}

export function diffCounters(after: PatternCounters, before: PatternCounters): PatternCounters {
  const out = emptyCounters();
  for (const k of Object.keys(out) as (keyof PatternCounters)[]) out[k] = after[k] - before[k];
  return out;
}

export function sumCounters(list: PatternCounters[]): PatternCounters {
  const out = emptyCounters();
  for (const c of list)
    for (const k of Object.keys(out) as (keyof PatternCounters)[]) out[k] += c[k];
  return out;
}

/** The patterns that take a lock, and those among them that also recompute early (XFetch). */
export const LOCK_PATTERNS: PatternName[] = ['distlock', 'two-tier', 'two-tier-xfetch'];
export const XFETCH_LOCK_PATTERNS: PatternName[] = ['two-tier-xfetch'];
