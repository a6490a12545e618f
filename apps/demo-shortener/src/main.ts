import { Logger } from '@nestjs/common';
import { createShortenerApp } from './app.factory';
import { redactCredentials } from './logging/redacting-logger';
import { describeCacheConnection } from './urls/cache-connection';
import {
  cacheConfig,
  type CacheConfig,
  codesConfig,
  type CodesConfig,
  databaseConfig,
  type DatabaseConfig,
  httpConfig,
  type HttpConfig,
} from './config';

async function main(): Promise<void> {
  const app = await createShortenerApp();
  app.enableShutdownHooks();
  const http = app.get<HttpConfig>(httpConfig.KEY);
  const database = app.get<DatabaseConfig>(databaseConfig.KEY);
  const cache = app.get<CacheConfig>(cacheConfig.KEY);
  const codes = app.get<CodesConfig>(codesConfig.KEY);
  await app.listen(http.port, http.host);
  new Logger('Shortener').log(
    `listening on http://${http.host}:${http.port} (public ${http.publicBaseUrl}); ` +
      `database ${redactCredentials(database.url)}, ` +
      `${cache.enabled ? `cache ${describeCacheConnection(cache)}` : 'cache off'}, codes: ${codes.strategy}`,
  );
}

main().catch((err: unknown) => {
  console.error(redactCredentials(err instanceof Error ? err.message : String(err)));
  process.exit(1);
});
