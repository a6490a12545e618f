/*
 * The collector alone: publishes synthetic ticks (or replays COLLECTOR_REPLAY_FILE) to the stream.
 *   node scripts/with-redis.js node -r ./scripts/register-ts.js apps/demo-ticks/src/collector.main.ts
 * When it ends (COLLECTOR_DURATION_MS, or the end of the file) it prints its totals as one JSON
 * line on stdout: { published, failed, volume, skipped, startedAt, endedAt }.
 */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CollectorModule } from './collector/collector.module';
import { CollectorService } from './collector/collector.service';
import { ticksConfigModule } from './config/ticks-config.module';
import { parseTicksEnv, TicksConfigError } from './config/ticks-env.schema';
import { redactCredentials } from './logging/redacting-logger';
import { appLogger } from './ticks-app.factory';

@Module({})
class CollectorAppModule {}

async function main(): Promise<void> {
  // The same variables and checks as the consumer's (COLLECTOR_*, REDIS_URL, TICKS_STREAM).
  const config = parseTicksEnv(process.env);
  const app = await NestFactory.createApplicationContext(
    { module: CollectorAppModule, imports: [ticksConfigModule(config), CollectorModule] },
    { logger: appLogger(config.logging.level), abortOnError: false },
  );
  const collector = app.get(CollectorService);
  const stop = (): void => void collector.stop();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const running = collector.start();
  process.send?.({ started: true });
  const stats = await running;
  await app.close();
  process.stdout.write(`${JSON.stringify(stats)}\n`);
  process.send?.({ done: true, stats });
}

main().catch((err) => {
  const text =
    err instanceof TicksConfigError ? `: ${err.message}` : ` failed: ${err?.stack ?? err}`;
  process.stderr.write(`demo-ticks collector${redactCredentials(text)}\n`);
  process.exit(1);
});
