import type { Duration } from '../core/duration';
import type { LockOptions, TimeoutOptions } from '../core/policy';
import { STAMPEDE_POLICY } from './stampede.constants';

/** What the decorators of one method recorded; composed into a policy at start-up. */
export interface MethodPolicyMetadata {
  cache?: boolean;
  ttl?: Duration;
  cacheNull?: boolean;
  key?: (...args: any[]) => string;
  singleFlight?: boolean;
  xfetch?: { beta?: number };
  lock?: LockOptions;
  jitter?: { ratio?: number };
  grace?: Duration;
  graceBackoff?: Duration;
  timeout?: Duration | TimeoutOptions;
  tags?: string[] | ((...args: any[]) => string[]);
  l1?: boolean;
}

export interface CacheableOptions {
  /** Cache key from the method's arguments. Default: `Class.method:` + the serialized arguments. */
  key?: (...args: any[]) => string;
  /** Default: the module's `defaultTtl`. */
  ttl?: Duration;
  /** Cache `null` results (negative caching). Default true. */
  cacheNull?: boolean;
  /**
   * Concurrent calls with the same key in this process share one load. Default true; `false`
   * opts out (each concurrent miss runs the method).
   */
  singleFlight?: boolean;
  /** Serve the stale value this long past the TTL while one refresh runs, and while refreshes fail. */
  grace?: Duration;
  /** After a failed refresh within grace, wait this long before the next attempt. Default 1 s. */
  graceBackoff?: Duration;
  /** Loader limits: `{ soft, hard }`, or one duration for hard. */
  timeout?: Duration | TimeoutOptions;
  /** Tags for `StampedeService.invalidateTags`: a list, or a function of the method's arguments. */
  tags?: string[] | ((...args: any[]) => string[]);
  /** Use the module's in-process tier for this method. Default true (when the module has one). */
  l1?: boolean;
}

/** Adds to the method's recorded policy, so that decorators stack in any order. */
export function extendPolicy(patch: MethodPolicyMetadata): MethodDecorator {
  return (_target, _property, descriptor) => {
    const method = descriptor.value as object | undefined;
    if (typeof method !== 'function') {
      throw new TypeError('stampede decorators go on methods');
    }
    const current = (Reflect.getMetadata(STAMPEDE_POLICY, method) ?? {}) as MethodPolicyMetadata;
    Reflect.defineMetadata(STAMPEDE_POLICY, { ...current, ...patch }, method);
    return descriptor;
  };
}

/** Caches the method's result in the store; the others build on it. */
export function Cacheable(options: CacheableOptions = {}): MethodDecorator {
  return extendPolicy({ cache: true, ...options });
}

/**
 * Concurrent calls with the same key in this process share one execution. Cached methods
 * (`@Cacheable`, `@XFetch`, `@DistLock`, `@JitterTtl`) do so by default; this is for methods
 * that are not cached (it does not cache by itself).
 */
export function SingleFlight(): MethodDecorator {
  return extendPolicy({ singleFlight: true });
}

/** Probabilistic early recomputation (XFetch, VLDB 2015); beta > 0, default 1. Implies caching. */
export function XFetch(beta?: number): MethodDecorator;
export function XFetch(options: { beta?: number }): MethodDecorator;
export function XFetch(arg: number | { beta?: number } = {}): MethodDecorator {
  return extendPolicy({ cache: true, xfetch: typeof arg === 'number' ? { beta: arg } : arg });
}

/**
 * One loader per key across all instances: `SET NX PX` lock, waiters woken by a fill
 * notification (polling every `poll` ms only as a fallback). Defaults: ttl 5000 ms, poll 2 ms.
 * Implies caching.
 */
export function DistLock(ttl?: Duration, poll?: number): MethodDecorator;
export function DistLock(options: LockOptions): MethodDecorator;
export function DistLock(arg?: Duration | LockOptions, poll?: number): MethodDecorator {
  const lock: LockOptions = typeof arg === 'object' ? arg : { ttl: arg, poll };
  return extendPolicy({ cache: true, lock });
}

/** Stored TTL drawn uniformly from ttl * (1 +- ratio), in [0, 1); default 0.1. Implies caching. */
export function JitterTtl(ratio?: number): MethodDecorator;
export function JitterTtl(options: { ratio?: number }): MethodDecorator;
export function JitterTtl(arg: number | { ratio?: number } = {}): MethodDecorator {
  return extendPolicy({ cache: true, jitter: typeof arg === 'number' ? { ratio: arg } : arg });
}
