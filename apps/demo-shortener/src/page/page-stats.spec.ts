import type { MethodMetrics } from '@nest-redis-resilience/stampede';
import { pageStats } from './page-stats';

const metrics = (m: Partial<MethodMetrics>) => m as MethodMetrics;

describe('pageStats', () => {
  it("sums the cache's hits, joins and lock waits over the lookup's methods", () => {
    const stats = pageStats(
      {
        'UrlResolver.resolve': metrics({ hits: 40, joins: 5, lockWaits: 2 }),
        'UrlResolver.misses': metrics({ hits: 3, joins: 1, lockWaits: 0 }),
      },
      { redirects: 48, dbLookups: 4, cache: 'up' },
    );
    expect(stats).toEqual({
      redirects: 48,
      cacheHits: 43,
      dbLookups: 4,
      joins: 6,
      lockWaits: 2,
      cache: 'up',
    });
  });

  it('shows zeros before the first lookup', () => {
    expect(pageStats({}, { redirects: 0, dbLookups: 0, cache: 'off' })).toEqual({
      redirects: 0,
      cacheHits: 0,
      dbLookups: 0,
      joins: 0,
      lockWaits: 0,
      cache: 'off',
    });
  });
});
