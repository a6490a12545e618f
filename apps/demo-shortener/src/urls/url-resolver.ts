import { Inject, Injectable } from '@nestjs/common';
import {
  Cacheable,
  currentLoadContext,
  DistLock,
  JitterTtl,
  SingleFlight,
  StampedeService,
} from '@nest-redis-resilience/stampede';
import { cacheConfig, type CacheConfig } from '../config';
import type { UrlRecord, UrlRepository } from '../db/url-repository';
import { ShortenerMetrics } from '../metrics/shortener-metrics';
import { URL_REPOSITORY } from '../shortener.constants';
import { urlCacheKey } from './cache-keys';

/**
 * The code -> URL lookup, cached in Redis. Known codes are cached for CACHE_TTL (the module's
 * defaultTtl, +-10 % jitter); unknown codes for MISS_CACHE_TTL, which the lookup sets on the
 * value it returns.
 */
@Injectable()
export class UrlResolver {
  private readonly missTtlMs: number;

  constructor(
    @Inject(URL_REPOSITORY) private readonly repo: UrlRepository,
    @Inject(cacheConfig.KEY) cache: CacheConfig,
    private readonly stampede: StampedeService,
    private readonly metrics: ShortenerMetrics,
  ) {
    this.missTtlMs = cache.missTtlMs;
  }

  /**
   * One database lookup per code per cache lifetime, across all instances: callers in this
   * process share one flow (SingleFlight), instances share one load (DistLock), and expiries
   * of keys written together are spread (JitterTtl). A `null` result (unknown code) is cached
   * too, with the short miss TTL set through the load's context, so a 404 flood also costs one
   * lookup.
   */
  @Cacheable({ key: urlCacheKey })
  @SingleFlight()
  @DistLock({ ttl: 5000, poll: 5 })
  @JitterTtl(0.1)
  async resolve(code: string): Promise<UrlRecord | null> {
    const found = await this.lookup(code);
    const load = currentLoadContext();
    if (found === null && load) load.ttl = this.missTtlMs;
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
    await this.stampede.invalidate(urlCacheKey(code)).catch(() => undefined);
  }
}
