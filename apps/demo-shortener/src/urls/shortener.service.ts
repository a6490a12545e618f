import { Inject, Injectable } from '@nestjs/common';
import { encodeBase62 } from '../codes/base62';
import {
  HASH_MAX_ATTEMPTS,
  hashCode,
  RESERVED_CODES,
  SnowflakeCodes,
  urlHash,
} from '../codes/code-strategy';
import {
  cacheConfig,
  type CacheConfig,
  codesConfig,
  type CodesConfig,
  httpConfig,
  type HttpConfig,
} from '../config';
import type { InsertResult, UrlRecord, UrlRepository } from '../db/url-repository';
import { URL_REPOSITORY } from '../shortener.constants';
import { UrlResolver } from './url-resolver';

export interface Created {
  record: UrlRecord;
  /** false: the URL was already shortened and its existing code is returned. */
  created: boolean;
}

export class CodeGenerationError extends Error {
  readonly code = 'CODE_GENERATION';
}

/** Sequence codes: Base62 of the row id; a reserved word (a route) gets a leading 0 instead. */
export function sequenceCode(id: bigint): string {
  const code = encodeBase62(id);
  return RESERVED_CODES.has(code) ? `0${code}` : code;
}

/** Creates short codes with the configured strategy and looks them up. */
@Injectable()
export class ShortenerService {
  private readonly snowflake: SnowflakeCodes;

  constructor(
    @Inject(URL_REPOSITORY) private readonly repo: UrlRepository,
    @Inject(cacheConfig.KEY) private readonly cache: CacheConfig,
    @Inject(codesConfig.KEY) private readonly codes: CodesConfig,
    @Inject(httpConfig.KEY) private readonly http: HttpConfig,
    private readonly resolver: UrlResolver,
  ) {
    this.snowflake = new SnowflakeCodes(codes.snowflakeWorkerId);
  }

  /** Shortens `url` (already validated); the same URL twice gets the same code. */
  async create(url: string): Promise<Created> {
    const hash = urlHash(url);
    const existing = await this.repo.findByUrlHash(hash);
    if (existing) return { record: existing, created: false };
    const result = await this.insert(url, hash);
    if ('conflict' in result) {
      // url-exists: another request stored the same URL a moment ago.
      const winner = await this.repo.findByUrlHash(hash);
      if (winner) return { record: winner, created: false };
      throw new CodeGenerationError(`could not store a code for ${url}`);
    }
    if (this.cache.enabled) await this.resolver.forgetMiss(result.record.code);
    return { record: result.record, created: true };
  }

  /** The record of `code`, through the cache unless CACHE_ENABLED=false. */
  resolve(code: string): Promise<UrlRecord | null> {
    return this.cache.enabled ? this.resolver.resolve(code) : this.resolver.lookup(code);
  }

  /** The `limit` links created last, newest first. */
  recent(limit: number): Promise<UrlRecord[]> {
    return this.repo.recent(limit);
  }

  shortUrl(code: string): string {
    return `${this.http.publicBaseUrl}/${code}`;
  }

  private async insert(url: string, hash: string): Promise<InsertResult> {
    switch (this.codes.strategy) {
      case 'sequence':
        // INSERT -> id -> Base62 -> UPDATE, as in the article.
        return this.repo.insertSequential(url, hash, sequenceCode);
      case 'hash':
        // Check for a collision, then INSERT; a collision (or a lost race) tries the next salt.
        for (let attempt = 0; attempt < HASH_MAX_ATTEMPTS; attempt++) {
          const code = hashCode(url, attempt);
          if (RESERVED_CODES.has(code) || (await this.repo.codeExists(code))) continue;
          const result = await this.repo.insertWithCode(code, url, hash);
          if ('conflict' in result && result.conflict === 'code-taken') continue;
          return result;
        }
        throw new CodeGenerationError(
          `${HASH_MAX_ATTEMPTS} hash codes for ${url} were all taken; try again`,
        );
      case 'snowflake':
        // The id is made here: one INSERT. A clash means two instances share a worker id.
        for (let attempt = 0; attempt < 3; attempt++) {
          const result = await this.repo.insertWithCode(this.snowflake.next(), url, hash);
          if ('conflict' in result && result.conflict === 'code-taken') continue;
          return result;
        }
        throw new CodeGenerationError(
          'Snowflake codes clash: give each instance its own SNOWFLAKE_WORKER_ID',
        );
    }
  }
}
