import { Inject, Injectable } from '@nestjs/common';
import {
  Cacheable,
  DistLock,
  JitterTtl,
  PolicyOptions,
  SingleFlight,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { cacheConfig, type CacheConfig } from '../config';
import type { UrlRecord, UrlRepository } from '../db/url-repository';
import { ShortenerMetrics } from '../metrics/shortener-metrics';
import { URL_REPOSITORY } from '../shortener.constants';
import { missCacheKey, urlCacheKey } from './cache-keys';

/**
 * The code -> URL lookup, cached in Redis. Known codes are cached for CACHE_TTL (the module's
 * defaultTtl, +-10 % jitter); unknown codes for MISS_CACHE_TTL, under their own key.
 */
@Injectable()
export class UrlResolver {
  private readonly missPolicy: PolicyOptions;

  constructor(
    @Inject(URL_REPOSITORY) private readonly repo: UrlRepository,
    @Inject(cacheConfig.KEY) cache: CacheConfig,
    private readonly stampede: StampedeService,
    private readonly metrics: ShortenerMetrics,
  ) {
    this.missPolicy = { ttl: cache.missTtlMs };
  }

  /**
   * One database lookup per code per cache lifetime, across all instances: callers in this
   * process share one flow (SingleFlight), instances share one load (DistLock), and expiries
   * of keys written together are spread (JitterTtl). A `null` result (unknown code) is not
   * cached here (cacheNull: false) but by the inner getOrLoad, with the short miss TTL: the
   * outer lock is held while it runs, so a 404 flood also costs one lookup.
   */
  @Cacheable({ key: urlCacheKey, cacheNull: false })
  @SingleFlight()
  @DistLock({ ttl: 5000, poll: 5 })
  @JitterTtl(0.1)
  async resolve(code: string): Promise<UrlRecord | null> {
    let found = null as UrlRecord | null;
    await this.stampede.getOrLoad<null | undefined>(
      missCacheKey(code),
      async () => {
        found = await this.lookup(code);
        // null (unknown) is cached as a miss; undefined (found) is never cached under this key.
        return found ? undefined : null;
      },
      this.missPolicy,
      'UrlResolver.misses',
    );
    return found;
  }

  /** The database itself (counted in shortener_db_lookups_total). */
  async lookup(code: string): Promise<UrlRecord | null> {
    const record = await this.repo.findByCode(code);
    this.metrics.countLookup(record !== null);
    return record;
  }

  /** Drops a cached miss of a code that now exists (best effort: the miss TTL bounds it anyway). */
  async forgetMiss(code: string): Promise<void> {
    await this.stampede.invalidate(missCacheKey(code)).catch(() => undefined);
  }
}
