import { Inject, Injectable } from '@nestjs/common';
import { Cluster } from 'ioredis';
import { RedisStore, StampedeService } from '@nest-redis-resilience/stampede';
import { cacheConfig, type CacheConfig } from '../config';
import type { UrlRepository } from '../db/url-repository';
import { URL_REPOSITORY } from '../shortener.constants';
import { cacheKeyPrefix, redirectCountKey } from './cache-keys';

/** Where redirect counts come from right now: Redis, nowhere (cache off), or Redis is down. */
export type RedirectCountsState = 'up' | 'down' | 'off';

/**
 * Redirects per code, in Redis beside the cache (one counter per code, in the slot of its cached
 * record: see redirectCountKey): one INCR per redirect, sent on the
 * cache's own connection and never awaited, so a redirect answered from the cache still waits
 * for one Redis read only, and never for the database. The counts are a view, not a ledger:
 * redirects answered while Redis is down are not counted, and without the cache
 * (CACHE_ENABLED=false) nothing is counted at all.
 */
@Injectable()
export class RedirectCounts {
  private readonly client?: RedisStore['client'];
  private readonly prefix: string;
  private readonly timeoutMs: number;

  constructor(
    stampede: StampedeService,
    @Inject(cacheConfig.KEY) cache: CacheConfig,
    @Inject(URL_REPOSITORY) repo: UrlRepository,
  ) {
    if (cache.enabled && stampede.store instanceof RedisStore) this.client = stampede.store.client;
    this.prefix = cacheKeyPrefix(cache.keyPrefix, repo.databaseId);
    this.timeoutMs = cache.operationTimeoutMs;
  }

  state(): RedirectCountsState {
    if (!this.client) return 'off';
    return this.client.status === 'ready' ? 'up' : 'down';
  }

  /** Counts one redirect of `code` (fire and forget: skipped while Redis is not connected). */
  count(code: string): void {
    if (this.state() !== 'up') return;
    this.client!.incr(redirectCountKey(this.prefix, code)).catch(() => undefined);
  }

  /**
   * The counts of `codes` (0 for a code never followed), or undefined when Redis is off, down,
   * or does not answer within REDIS_OPERATION_TIMEOUT.
   */
  async of(codes: string[]): Promise<Map<string, number> | undefined> {
    if (this.state() !== 'up') return undefined;
    if (codes.length === 0) return new Map();
    let timer: NodeJS.Timeout | undefined;
    try {
      const values = await Promise.race([
        this.read(codes.map((code) => redirectCountKey(this.prefix, code))),
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), this.timeoutMs);
        }),
      ]);
      if (!values) return undefined;
      return new Map(codes.map((code, i) => [code, Number(values[i] ?? 0)]));
    } catch {
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  /** One MGET; on a Cluster one GET per key (the counters live in the slots of their codes). */
  private read(keys: string[]): Promise<(string | null)[]> {
    const client = this.client!;
    if (client instanceof Cluster) return Promise.all(keys.map((key) => client.get(key)));
    return client.mget(...keys);
  }
}
