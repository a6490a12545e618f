import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { Cluster } from 'ioredis';
import { RedisStore, StampedeService } from '@nest-redis-resilience/stampede';
import { cacheConfig, type CacheConfig } from '../config';
import type { UrlRepository } from '../db/url-repository';
import { URL_REPOSITORY } from '../shortener.constants';
import { cacheKeyPrefix, redirectCountKey } from './cache-keys';

/** Where redirect counts come from right now: Redis, nowhere (cache off), or Redis is down. */
export type RedirectCountsState = 'up' | 'down' | 'off';

/** How often the redirects counted in this process are added to Redis, ms. */
export const REDIRECT_COUNTS_FLUSH_MS = 100;

/**
 * Redirects per code, in Redis beside the cache (one counter per code, in the slot of its cached
 * record: see redirectCountKey). Counted in the process and added every
 * REDIRECT_COUNTS_FLUSH_MS (one INCRBY per code followed since), on the cache's own connection
 * and never awaited: a redirect answered from the cache still waits for one Redis read only (none
 * with the in-process tier), never for the database, and a hot code costs its Redis master a few
 * writes per second per instance instead of one per redirect. Counts read through `of()` include
 * this process's not yet flushed ones. The counts are a view, not a ledger:
 * redirects answered while Redis is down are not counted, and without the cache
 * (CACHE_ENABLED=false) nothing is counted at all.
 */
@Injectable()
export class RedirectCounts implements OnModuleDestroy {
  private readonly client?: RedisStore['client'];
  /** Redirects counted here and not yet added to Redis, per code. */
  private readonly pending = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
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

  /** Counts one redirect of `code` (skipped while Redis is not connected). */
  count(code: string): void {
    if (this.state() !== 'up') return;
    this.pending.set(code, (this.pending.get(code) ?? 0) + 1);
    if (this.pending.size >= 10_000) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), REDIRECT_COUNTS_FLUSH_MS).unref();
  }

  /** Adds the pending counts to Redis (fire and forget: lost if Redis fails meanwhile). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0 || this.state() !== 'up') return this.pending.clear();
    for (const [code, n] of this.pending)
      this.client!.incrby(redirectCountKey(this.prefix, code), n).catch(() => undefined);
    this.pending.clear();
  }

  onModuleDestroy(): void {
    this.flush();
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
      return new Map(
        codes.map((code, i) => [code, Number(values[i] ?? 0) + (this.pending.get(code) ?? 0)]),
      );
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
