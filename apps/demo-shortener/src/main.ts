import { Logger } from '@nestjs/common';
import { createShortenerApp } from './app.factory';
import { loadConfig } from './config';

async function main(): Promise<void> {
  const config = loadConfig();
  const app = await createShortenerApp(config);
  app.enableShutdownHooks();
  await app.listen(config.port, config.host);
  const cache = config.cacheEnabled ? `cache ${config.redisUrl}` : 'cache off';
  const database = config.databaseUrl.replace(/\/\/([^@/]*)@/, '//***@');
  new Logger('Shortener').log(
    `listening on http://${config.host}:${config.port} (public ${config.publicBaseUrl}); ` +
      `database ${database}, ${cache}, codes: ${config.codeStrategy}`,
  );
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
