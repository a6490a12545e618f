/*
 * The benchmark's patterns by name, the config of an app instance, the counters of a pattern, and
 * the Redis key names the library uses: plain data shared by the app, the workers and the
 * scenarios.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { StampedeModuleOptions } from '@nest-redis-resilience/stampede';

export const LIBRARY_PATTERNS = [
  ...['naive', 'singleflight', 'xfetch', 'distlock', 'two-tier', 'two-tier-xfetch'],
  ...['two-tier-grace', 'jitter'],
] as const;
export const LOCAL_PATTERNS = ['distlock-poll', 'xfetch-uncoalesced', 'bento-like'] as const;
export type LibraryPattern = (typeof LIBRARY_PATTERNS)[number];
export type PatternName = LibraryPattern | (typeof LOCAL_PATTERNS)[number];
export const ALL_PATTERNS: PatternName[] = [...LIBRARY_PATTERNS, ...LOCAL_PATTERNS];

/** The patterns that take a lock, and those among them that also recompute early (XFetch). */
export const LOCK_PATTERNS: PatternName[] = ['distlock', 'two-tier', 'two-tier-xfetch'];
export const XFETCH_LOCK_PATTERNS: PatternName[] = ['two-tier-xfetch'];

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
  /** Record the key and start time of every loader call (double refreshes, loads per key). */
  recordLoads?: boolean;
  /** Share of loader calls that throw (after the backend time), 0 to 1. */
  failRate?: number;
  /** StampedeModule options; the library's defaults when absent. */
  operationTimeout?: number;
  cooldown?: number;
  /** More StampedeModule options (JSON: forked instances get them through BENCH_CONFIG). */
  moduleOptions?: Pick<StampedeModuleOptions, 'l1'>;
  /** `two-tier-grace`: @Cacheable grace and graceBackoff (ms); default 10 s and the library's. */
  graceMs?: number;
  graceBackoffMs?: number;
}

/**
 * Counters of one pattern, read before and after a round: loads (loader calls), misses (calls
 * that waited for a loader), lockWaitMs (time spent waiting for another holder's lock), the
 * library's metrics (0 for the bench-local patterns, which count misses and lockWaitMs and
 * their own hits), l1Hits (library L1 or bento-like's own LRU), staleServes (within grace, or
 * during an early recomputation) and failSafes (failed refreshes whose callers kept the stale
 * value).
 */
const COUNTERS = [
  ...['loads', 'misses', 'lockWaitMs', 'earlyRecomputes', 'storeErrors', 'calls', 'hits'],
  ...['joins', 'lockWaits', 'lockTimeouts', 'errors', 'l1Hits', 'staleServes', 'failSafes'],
] as const;
export type PatternCounters = Record<(typeof COUNTERS)[number], number>;

/** Counters from any object with (some of) their names; the others 0. */
export function counters(from: object = {}): PatternCounters {
  const out = {} as PatternCounters;
  for (const k of COUNTERS) {
    const v = (from as Record<string, unknown>)[k];
    out[k] = typeof v === 'number' ? v : 0;
  }
  return out;
}

export function diffCounters(after: PatternCounters, before: PatternCounters): PatternCounters {
  const out = counters();
  for (const k of COUNTERS) out[k] = after[k] - before[k];
  return out;
}

export function sumCounters(list: PatternCounters[]): PatternCounters {
  const out = counters();
  for (const c of list) for (const k of COUNTERS) out[k] += c[k];
  return out;
}

/** Error thrown by a failing load (failRate); `id` tells the bench which load it came from. */
export class BackendError extends Error {
  constructor(readonly id: number) {
    super(`backend failure #${id}`);
  }
}

/**
 * What one caller's call did, recorded through AsyncLocalStorage (load jobs with `classify`):
 * the end of a loader call that ran in its async context, and whether a lock step of the call
 * found another holder's lock (BenchApp.watchLockWaits). An XFetch or grace refresh that a call
 * started in the background ends after the call has returned, so that call is still a hit.
 */
export interface CallRecord {
  loadEnd?: number;
  lockWait?: boolean;
}

export const callContext = new AsyncLocalStorage<CallRecord>();

export function valueKey(prefix: string, key: string): string {
  return `${prefix}{${key}}`;
}

/** The library's lock key of a refresh, and of the bench-local distlock-poll pattern. */
export function lockKey(prefix: string, key: string): string {
  return `${prefix}{${key}}:lock`;
}

/** The mark with which the library's lock of a miss fills the value key until the value comes. */
export const MISS_LOCK_MARK = '\u0000lock:';
