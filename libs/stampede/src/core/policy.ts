import { checkPositiveNumber, checkRatio, type OptionFail } from '@nest-redis-resilience/common';
import { Duration, toMs } from './duration';
import { StampedeConfigError } from './errors';

/** How one cached call is protected; what the decorators compose and `getOrLoad` accepts. */
export interface PolicyOptions {
  /** Cache the result (default true for getOrLoad; implied by @Cacheable, @XFetch, @DistLock, @JitterTtl). */
  cache?: boolean;
  /** Time to live of a cached value; default: the module's `defaultTtl`. */
  ttl?: Duration;
  /** Cache `null` results (negative caching). Default true. `undefined` is never cached. */
  cacheNull?: boolean;
  /**
   * Concurrent calls with the same key in this process share one execution. Default: true when
   * the result is cached (`false` opts out), false otherwise.
   */
  singleFlight?: boolean;
  /** Probabilistic early recomputation; `true` means beta = 1. */
  xfetch?: boolean | XFetchOptions;
  /** Cross-instance lock around the load; `true` means the defaults. */
  lock?: boolean | LockOptions;
  /** Spread stored TTLs over ttl * (1 +- ratio); a number is the ratio. */
  jitter?: number | JitterOptions;
  /**
   * Keep the value this long past its TTL: callers then get the stale value at once while one
   * refresh runs, and keep getting it while refreshes fail, until grace ends (fail-safe).
   */
  grace?: Duration;
  /** After a failed refresh within grace, wait this long before the next attempt. Default 1 s. */
  graceBackoff?: Duration;
  /** Loader time limits; a single duration is the hard limit. */
  timeout?: Duration | TimeoutOptions;
  /** Tags of the value, for `invalidateTags` (decorators take a function of the arguments). */
  tags?: string[];
  /** Serve hits from the in-process tier when the module has one (`l1` option). Default true. */
  l1?: boolean;
}

export interface TimeoutOptions {
  /** Past it, a caller with a stale value (grace) gets that value; the load goes on. */
  soft?: Duration;
  /** Past it, callers get a StampedeTimeoutError; the load may still finish and fill the cache. */
  hard?: Duration;
}

export interface XFetchOptions {
  /** > 0; larger recomputes earlier. Default 1. */
  beta?: number;
}

export interface LockOptions {
  /** Lock time to live: a holder that dies blocks the others at most this long. Default 5000 ms. */
  ttl?: Duration;
  /** Fallback poll interval in ms, used only while fill notifications are unavailable. Default 2. */
  poll?: number;
  /** Longest a caller waits for other holders in all; then it loads itself. Default 2 x ttl. */
  wait?: Duration;
  /** Extend the lock while the loader runs (for loaders that may outlive the lock TTL). Default false. */
  autoExtend?: boolean;
}

export interface JitterOptions {
  /** In [0, 1). Default 0.1. */
  ratio?: number;
}

/** A validated policy, all durations in ms. */
export interface StampedePolicy {
  cache: boolean;
  ttl: number;
  cacheNull: boolean;
  singleFlight: boolean;
  xfetch?: { beta: number };
  lock?: { ttl: number; poll: number; wait: number; autoExtend: boolean };
  jitter?: { ratio: number };
  /** 0: none. */
  grace: number;
  graceBackoff: number;
  timeout?: { soft?: number; hard?: number };
  tags?: string[];
  l1: boolean;
}

export const DEFAULT_GRACE_BACKOFF = 1000;
export const DEFAULT_LOCK_TTL = 5000;
export const DEFAULT_LOCK_POLL = 2;
export const DEFAULT_BETA = 1;
export const DEFAULT_JITTER_RATIO = 0.1;

/** Validates options and fills defaults; `where` names the method or call site in errors. */
export function resolvePolicy(
  options: PolicyOptions,
  defaultTtl: number,
  where: string,
): StampedePolicy {
  const ttl = options.ttl === undefined ? defaultTtl : toMs(options.ttl, `${where}: ttl`);
  const cache = options.cache ?? true;
  const policy: StampedePolicy = {
    cache,
    ttl,
    cacheNull: options.cacheNull ?? true,
    // A cache must not stampede by default: concurrent misses of one key share one load.
    singleFlight: options.singleFlight ?? cache,
    grace: options.grace === undefined ? 0 : toMs(options.grace, `${where}: grace`),
    graceBackoff:
      options.graceBackoff === undefined
        ? DEFAULT_GRACE_BACKOFF
        : toMs(options.graceBackoff, `${where}: graceBackoff`),
    l1: options.l1 ?? true,
  };
  if (options.timeout !== undefined)
    policy.timeout = resolveTimeout(options.timeout, policy, where);
  if (options.tags !== undefined) policy.tags = checkTags(options.tags, where);
  if (options.xfetch) {
    const beta = options.xfetch === true ? DEFAULT_BETA : (options.xfetch.beta ?? DEFAULT_BETA);
    checkPositiveNumber('XFetch beta', beta, failAt(where), BETA);
    policy.xfetch = { beta };
  }
  if (options.lock) {
    const lock = options.lock === true ? {} : options.lock;
    const lockTtl =
      lock.ttl === undefined ? DEFAULT_LOCK_TTL : toMs(lock.ttl, `${where}: lock ttl`);
    const poll = lock.poll ?? DEFAULT_LOCK_POLL;
    checkPositiveNumber('lock poll', poll, failAt(where), POLL);
    if (poll > lockTtl) {
      throw new StampedeConfigError(
        `${where}: lock poll (${poll} ms) is longer than the lock ttl (${lockTtl} ms); a waiter would sleep past the lock's expiry`,
      );
    }
    const wait = lock.wait === undefined ? 2 * lockTtl : toMs(lock.wait, `${where}: lock wait`);
    policy.lock = { ttl: lockTtl, poll, wait, autoExtend: lock.autoExtend ?? false };
  }
  if (options.jitter !== undefined) {
    const ratio =
      typeof options.jitter === 'number'
        ? options.jitter
        : (options.jitter.ratio ?? DEFAULT_JITTER_RATIO);
    checkRatio('jitter ratio', ratio, failAt(where));
    policy.jitter = { ratio };
  }
  if (
    !policy.cache &&
    (policy.xfetch || policy.lock || policy.jitter || policy.grace || policy.tags)
  ) {
    throw new StampedeConfigError(
      `${where}: XFetch, DistLock, JitterTtl, grace and tags work on cached values; remove cache: false`,
    );
  }
  return policy;
}

const BETA = (got: string) => `must be a number > 0 (1 is the paper's default), got ${got}`;
const POLL = (got: string) => `must be a positive number of ms, got ${got}`;

/** The `fail` of the value checkers: `<where>: <option> <reason>`. */
export function failAt(where: string): OptionFail {
  return (option, reason) => {
    throw new StampedeConfigError(`${where}: ${option} ${reason}`);
  };
}

function resolveTimeout(
  timeout: Duration | TimeoutOptions,
  policy: StampedePolicy,
  where: string,
): { soft?: number; hard?: number } {
  const options: TimeoutOptions =
    typeof timeout === 'object' && timeout !== null ? timeout : { hard: timeout };
  const soft =
    options.soft === undefined ? undefined : toMs(options.soft, `${where}: timeout.soft`);
  const hard =
    options.hard === undefined ? undefined : toMs(options.hard, `${where}: timeout.hard`);
  if (soft === undefined && hard === undefined) {
    throw new StampedeConfigError(`${where}: timeout needs soft, hard or both`);
  }
  if (soft !== undefined && hard !== undefined && soft > hard) {
    throw new StampedeConfigError(
      `${where}: timeout.soft (${soft} ms) is longer than timeout.hard (${hard} ms); soft must come first`,
    );
  }
  if (soft !== undefined && !policy.grace) {
    throw new StampedeConfigError(
      `${where}: timeout.soft serves the stale value, which needs grace; add grace or use hard only`,
    );
  }
  return { soft, hard };
}

/** Tags are non-empty strings. */
export function checkTags(tags: unknown, where: string): string[] {
  if (!Array.isArray(tags) || tags.some((tag) => typeof tag !== 'string' || tag === '')) {
    throw new StampedeConfigError(
      `${where}: tags must be an array of non-empty strings, got ${describe(tags)}`,
    );
  }
  return tags as string[];
}

function describe(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
