import { INestApplication, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions } from '@nestjs/microservices';
import { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { CandleStore } from './candles/candle-store';
import { CollectorService } from './collector/collector.service';
import { TicksConfig } from './config';
import { TicksMetrics } from './consumer/ticks.metrics';
import { TicksAppModule } from './ticks-app.module';

export interface TicksApp {
  app: INestApplication;
  server: ServerRedisStreams;
  store: CandleStore;
  metrics: TicksMetrics;
  config: TicksConfig;
  /** The collector, when `config.collectorInProcess`. */
  collector?: CollectorService;
  /** Base URL of the HTTP API, e.g. http://127.0.0.1:3001 */
  url: string;
  close(): Promise<void>;
}

export function loggerLevels(level: TicksConfig['logLevel']): LogLevel[] | false {
  const order: LogLevel[] = ['error', 'warn', 'log', 'debug'];
  if (level === 'silent') return false;
  return order.slice(0, order.indexOf(level) + 1).concat(level === 'debug' ? ['verbose'] : []);
}

/** The consumer on ServerRedisStreams, with the options of `config`. */
export function createTicksServer(config: TicksConfig): ServerRedisStreams {
  return new ServerRedisStreams({
    connection: config.redisUrl,
    group: config.group,
    consumer: config.consumer,
    read: config.read,
    ack: config.ack,
    claim: config.claim,
    deadLetter: {
      maxDeliveries: config.maxDeliveries,
      stream: () => config.deadLetterStream,
    },
    concurrency: config.concurrency,
    // Entries handled before are skipped per batch (in-process LRU, then Redis); the candle
    // script marks each entry's record done in the same step as it applies the tick.
    idempotency: {
      store: 'redis',
      keyPrefix: `${config.keyPrefix}idem:`,
      ttlMs: config.idempotency.ttlMs,
      lockMs: config.idempotency.lockMs,
      maxSize: config.idempotency.maxSize,
    },
  });
}

/**
 * Builds the hybrid app (HTTP + the ServerRedisStreams consumer) without starting it.
 * `startTicksApp` starts it.
 */
export async function createTicksApp(
  config: TicksConfig,
): Promise<{ app: INestApplication; server: ServerRedisStreams }> {
  const server = createTicksServer(config);
  const app = await NestFactory.create(TicksAppModule.register(config, server), {
    logger: loggerLevels(config.logLevel),
    abortOnError: false,
  });
  app.connectMicroservice<MicroserviceOptions>({ strategy: server }, { inheritAppConfig: true });
  return { app, server };
}

/** Builds and starts the app: consumer, HTTP on config.http, and the in-process collector if enabled. */
export async function startTicksApp(config: TicksConfig): Promise<TicksApp> {
  const { app, server } = await createTicksApp(config);
  try {
    await app.startAllMicroservices();
    const metrics = app.get(TicksMetrics);
    metrics.instrument(server);
    await app.listen(config.http.port, config.http.host);
    const address = app.getHttpServer().address() as { port: number } | string;
    const port = typeof address === 'string' ? config.http.port : address.port;
    const host =
      config.http.host === '0.0.0.0' || config.http.host === '::' ? '127.0.0.1' : config.http.host;
    let closing: Promise<void> | undefined;
    let collector: CollectorService | undefined;
    if (config.collectorInProcess) {
      const started = app.get(CollectorService);
      collector = started;
      void started.start().then((stats) => metrics.published.inc(stats.published));
    }
    return {
      app,
      server,
      store: app.get(CandleStore),
      metrics,
      config,
      collector,
      url: `http://${host}:${port}`,
      close: () => (closing ??= app.close()),
    };
  } catch (err) {
    await app.close().catch(() => undefined);
    throw err;
  }
}
