import type { MethodMetrics } from '@nest-redis-resilience/stampede';
import type { RedirectCountsState } from '../urls/redirect-counts';

/** What the page's live panel shows: counts of this instance since it started. */
export interface PageStats {
  /** Redirects answered (302). */
  redirects: number;
  /** Lookups answered from Redis (a known code, or a cached "unknown code"). */
  cacheHits: number;
  /** Lookups that reached the database. */
  dbLookups: number;
  /** Lookups that joined one already running in this process (single-flight). */
  joins: number;
  /** Lookups that waited for another caller's Redis lock instead of reading the database. */
  lockWaits: number;
  /** The cache: Redis connected, down (redirects read the database), or off (CACHE_ENABLED=false). */
  cache: RedirectCountsState;
}

/**
 * The panel's numbers from the app's own counters and the stampede library's per-method counters
 * (`StampedeService.metrics()`), summed over the lookup's methods: the cached record and the
 * cached "unknown code" are both the cache answering.
 */
export function pageStats(
  stampede: Record<string, MethodMetrics>,
  own: { redirects: number; dbLookups: number; cache: RedirectCountsState },
): PageStats {
  let cacheHits = 0;
  let joins = 0;
  let lockWaits = 0;
  for (const m of Object.values(stampede)) {
    cacheHits += m.hits;
    joins += m.joins;
    lockWaits += m.lockWaits;
  }
  return {
    redirects: own.redirects,
    cacheHits,
    dbLookups: own.dbLookups,
    joins,
    lockWaits,
    cache: own.cache,
  };
}
