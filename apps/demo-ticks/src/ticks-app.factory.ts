import { INestApplication, LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MicroserviceOptions } from '@nestjs/microservices';
import { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { CandleStore } from './candles/candle-store';
import { CollectorService } from './collector/collector.service';
import { transportConnection } from './redis/redis-connection';
import { partitionsOption } from './redis/tick-streams';
import { deadLetterStreamOf } from './redis/redis-keys';
import { LogLevelName, TicksSettings } from './config/ticks-env.schema';
import { RedactingLogger } from './logging/redacting-logger';
import { registerOtelPrometheus } from './metrics/otel-prometheus';
import { TicksMetrics } from './metrics/ticks.metrics';
import { TicksAppModule } from './ticks-app.module';
import { TICKS_PATTERN } from './ticks.constants';

export interface TicksApp {
  app: INestApplication;
  server: ServerRedisStreams;
  store: CandleStore;
  metrics: TicksMetrics;
  /** The configuration namespaces the app runs with. */
  config: TicksSettings;
  /** The collector, when `config.collector.inProcess`. */
  collector?: CollectorService;
  /** Base URL of the HTTP API, e.g. http://127.0.0.1:3001 */
  url: string;
  close(): Promise<void>;
}

/** The app's logger at LOG_LEVEL (credentials in URLs redacted), or false for `silent`. */
export function appLogger(level: LogLevelName): LoggerService | false {
  const order: LogLevel[] = ['error', 'warn', 'log', 'debug'];
  if (level === 'silent') return false;
  return new RedactingLogger(
    order.slice(0, order.indexOf(level) + 1).concat(level === 'debug' ? ['verbose'] : []),
  );
}

/** The consumer on ServerRedisStreams, with the options of the `redis` and `consumer` namespaces. */
export function createTicksServer(config: TicksSettings): ServerRedisStreams {
  const { consumer } = config;
  return new ServerRedisStreams({
    connection: transportConnection(config.redis),
    // The handler's pattern names no stream: it reads TICKS_STREAM.
    streams: { [TICKS_PATTERN]: consumer.stream },
    // TICKS_PARTITIONS: one group over the partitions, read by every consumer (a reader per slot).
    partitions: partitionsOption(consumer),
    group: consumer.group,
    consumer: consumer.consumer,
    read: consumer.read,
    ack: consumer.ack,
    // Entries of crashed consumers are claimed a page (`count`) per round, a round every
    // `intervalMs`: with rounds no slower than a page is handled, a backlog drains as fast as the
    // consumer handles it (CONCURRENCY above `count` lets a page be claimed while one is handled).
    claim: consumer.claim,
    deadLetter: {
      maxDeliveries: consumer.maxDeliveries,
      // On a Cluster each stream's dead letters stay in its slot (<stream>:dlq).
      stream: (stream) => deadLetterStreamOf(consumer, stream),
    },
    concurrency: consumer.concurrency,
    // Entries handled before are skipped per batch (in-process LRU, then Redis); the candle script
    // marks each entry's record done in the same step as it applies the tick.
    idempotency: {
      store: 'redis',
      keyPrefix: `${config.candles.keyPrefix}idem:`,
      ttlMs: consumer.idempotency.ttlMs,
      lockMs: consumer.idempotency.lockMs,
      maxSize: consumer.idempotency.maxSize,
    },
  });
}

/**
 * Builds the hybrid app (HTTP + the ServerRedisStreams consumer) without starting it.
 * `startTicksApp` starts it.
 */
export async function createTicksApp(
  config: TicksSettings,
): Promise<{ app: INestApplication; server: ServerRedisStreams }> {
  // Before the server and the app exist: the transport takes its meter from the global
  // MeterProvider when it listens (the libraries' metrics on /metrics). Once per process.
  registerOtelPrometheus();
  const server = createTicksServer(config);
  const app = await NestFactory.create(TicksAppModule.register(config, server), {
    logger: appLogger(config.logging.level),
    abortOnError: false,
  });
  // Initialised before the server listens (a hybrid app's startAllMicroservices() does not
  // initialise it): the consumer's providers (CandleStore, its scripts) are ready for its handler.
  try {
    await app.init();
  } catch (err) {
    await app.close().catch(() => undefined);
    throw err;
  }
  app.connectMicroservice<MicroserviceOptions>({ strategy: server }, { inheritAppConfig: true });
  return { app, server };
}

/**
 * Builds and starts the app: consumer, HTTP on `config.http`, and the in-process collector if
 * enabled. `config` comes from parseTicksEnv (main.ts: process.env).
 */
export async function startTicksApp(config: TicksSettings): Promise<TicksApp> {
  const { app, server } = await createTicksApp(config);
  try {
    await app.startAllMicroservices();
    const metrics = app.get(TicksMetrics);
    const { host, port } = config.http;
    await app.listen(port, host);
    const address = app.getHttpServer().address() as { port: number } | string;
    const boundPort = typeof address === 'string' ? port : address.port;
    const urlHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
    let closing: Promise<void> | undefined;
    let collector: CollectorService | undefined;
    if (config.collector.inProcess) {
      const started = app.get(CollectorService);
      collector = started;
      // Its ClientRedisStreams counts what it writes (messaging_client_sent_messages_total).
      void started.start();
    }
    return {
      app,
      server,
      store: app.get(CandleStore),
      metrics,
      config,
      collector,
      url: `http://${urlHost}:${boundPort}`,
      close: () => (closing ??= app.close()),
    };
  } catch (err) {
    await app.close().catch(() => undefined);
    throw err;
  }
}
