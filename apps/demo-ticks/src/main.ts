/*
 * The demo-ticks app: the consumer (ServerRedisStreams -> candles), the HTTP API and, unless
 * COLLECTOR=false, the collector publishing synthetic ticks. Configuration: see the README.
 *   npm run start:ticks
 */
import { Logger } from '@nestjs/common';
import { parseTicksEnv, TicksConfigError } from './config/ticks-env.schema';
import { redactCredentials } from './logging/redacting-logger';
import { startTicksApp } from './ticks-app.factory';

async function main(): Promise<void> {
  const config = parseTicksEnv(process.env);
  const ticks = await startTicksApp(config);
  ticks.app.enableShutdownHooks();
  const logger = new Logger('demo-ticks');
  logger.log(
    `Consuming "${config.consumer.stream}" as ${config.consumer.group}/${config.consumer.consumer}; HTTP on ${ticks.url}`,
  );
  logger.log(`The page: ${ticks.url}/`);
  logger.log(
    `Try: ${ticks.url}/symbols  ${ticks.url}/symbols/SYM001/candles?interval=1m&limit=5  ${ticks.url}/health  ${ticks.url}/metrics`,
  );
  process.send?.({ ready: true, url: ticks.url, pid: process.pid });
}

main().catch((err) => {
  const text =
    err instanceof TicksConfigError ? `: ${err.message}` : ` failed to start: ${err?.stack ?? err}`;
  process.stderr.write(`demo-ticks${redactCredentials(text)}\n`);
  process.exit(1);
});
