import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import type { UrlRepository } from '../db/url-repository';
import { URL_REPOSITORY } from '../shortener.constants';

/** Terminus indicator: up when the database answers `SELECT 1` within the timeout. */
@Injectable()
export class DatabaseHealthIndicator {
  constructor(
    @Inject(URL_REPOSITORY) private readonly repo: UrlRepository,
    private readonly health: HealthIndicatorService,
  ) {}

  async isHealthy<const Key extends string>(key: Key, timeoutMs: number) {
    const indicator = this.health.check(key);
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.repo.ping(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
      return indicator.up({ database: this.repo.kind, latencyMs: Date.now() - started });
    } catch (err) {
      return indicator.down({
        database: this.repo.kind,
        message: err instanceof Error ? err.message : String(err),
      });
    } finally {
      clearTimeout(timer);
    }
  }
}
