import { LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { parseShortenerEnv, ShortenerEnv } from './config';
import { fastifyOptions } from './http/fastify-options';
import { HttpErrorFilter } from './http/http-error.filter';
import { RedactingLogger } from './logging/redacting-logger';
import { registerOtelPrometheus } from './metrics/otel-prometheus';
import { ShortenerModule } from './shortener.module';

export interface CreateShortenerAppOptions {
  /**
   * Nest logger levels, a logger, or false for none (tests). Default: log, warn, error. With
   * levels, URL credentials are redacted from every line (RedactingLogger).
   */
  logger?: false | LogLevel[] | LoggerService;
}

/**
 * Builds the shortener (not yet listening), configured by `env` (default process.env; tests
 * pass their own variables). Throws ConfigError naming every bad variable. `await
 * app.listen(port, host)` to serve, or `app.init()` for tests.
 */
export async function createShortenerApp(
  env: NodeJS.ProcessEnv | ShortenerEnv = process.env,
  options: CreateShortenerAppOptions = {},
): Promise<NestFastifyApplication> {
  const config = parseShortenerEnv(env);
  // Before the app exists: StampedeModule takes its meter from the global MeterProvider when it
  // starts (the libraries' metrics on /metrics). Once per process.
  registerOtelPrometheus();
  const adapter = new FastifyAdapter(fastifyOptions(config.http));
  // JSON only: Fastify answers any other body 415. text/plain (parsed by default),
  // urlencoded and multipart are what a cross-site HTML form can send without a preflight.
  adapter.getInstance().removeContentTypeParser('text/plain');
  const app = await NestFactory.create<NestFastifyApplication>(
    ShortenerModule.forRoot(config),
    adapter,
    {
      logger: Array.isArray(options.logger)
        ? new RedactingLogger(options.logger)
        : (options.logger ?? new RedactingLogger(['log', 'warn', 'error'])),
      abortOnError: false,
      // Nest would add a urlencoded parser; Fastify's own JSON parser is the only one wanted.
      bodyParser: false,
    },
  );
  app.useGlobalFilters(new HttpErrorFilter(config.http.bodyLimit));
  return app;
}
