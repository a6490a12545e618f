import { Inject, Injectable, Module, OnApplicationShutdown } from '@nestjs/common';
import { databaseConfig, type DatabaseConfig } from '../config';
import { ShortenerMetrics } from '../metrics/shortener-metrics';
import { URL_REPOSITORY } from '../shortener.constants';
import { GuardedUrlRepository } from './guarded-url-repository';
import { createUrlRepository } from './repository.factory';
import type { UrlRepository } from './url-repository';

/** Closes the database pool (or file) when the app closes. */
@Injectable()
export class DatabaseLifecycle implements OnApplicationShutdown {
  constructor(@Inject(URL_REPOSITORY) private readonly repo: UrlRepository) {}

  async onApplicationShutdown(): Promise<void> {
    await this.repo.close();
  }
}

/**
 * The URL repository (URL_REPOSITORY) of DATABASE_URL, initialized (tables and database
 * identity created) before anything uses it. Needs the global configuration and metrics.
 */
@Module({
  providers: [
    {
      provide: URL_REPOSITORY,
      inject: [databaseConfig.KEY, ShortenerMetrics],
      useFactory: async (
        database: DatabaseConfig,
        metrics: ShortenerMetrics,
      ): Promise<UrlRepository> => {
        const repo = new GuardedUrlRepository(createUrlRepository(database), {
          // A backstop for what the drivers' own timeouts do not cover (a stalled network).
          deadlineMs: database.connectTimeoutMs + database.statementTimeoutMs + 1000,
          observe: (operation, seconds, failed) => metrics.observeQuery(operation, seconds, failed),
        });
        try {
          await repo.init();
        } catch (err) {
          await repo.close().catch(() => undefined);
          throw err;
        }
        return repo;
      },
    },
    DatabaseLifecycle,
  ],
  exports: [URL_REPOSITORY],
})
export class DatabaseModule {}
