import type { Redis } from 'ioredis';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';

/**
 * Prometheus metrics of one app (its own registry, so that two apps in one process do not
 * share counters).
 */
export class TicksMetrics {
  readonly registry = new Registry();
  readonly ticksHandled: Counter;
  readonly duplicatesSkipped: Counter<'layer'>;
  readonly deadLettered: Counter;
  readonly handlerErrors: Counter;
  readonly xackCalls: Counter;
  readonly xackErrors: Counter;
  readonly ackBatchSize: Histogram;
  readonly e2eLatency: Histogram;
  readonly published: Counter;
  private server: ServerRedisStreams | undefined;
  private readonly counted = new WeakSet<object>();
  /** The transport's duplicate counts already added to duplicatesSkipped. */
  private readonly transportSeen = { memory: 0, redis: 0 };

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.ticksHandled = new Counter({
      name: 'ticks_handled_total',
      help: 'Ticks folded into candles (first application of a stream entry).',
      registers,
    });
    const syncTransport = (): void => this.syncTransportDuplicates();
    this.duplicatesSkipped = new Counter({
      name: 'ticks_duplicates_skipped_total',
      help: 'Deliveries of a stream entry already applied: layer "memory" and "redis" = skipped by the transport\'s idempotency check (its in-process LRU, its Redis records), "effect" = caught by the candle script, which marks a record done in the same step as it applies the tick.',
      labelNames: ['layer'],
      registers,
      collect: syncTransport,
    });
    this.deadLettered = new Counter({
      name: 'ticks_dead_lettered_total',
      help: 'Invalid ticks moved to the dead-letter stream.',
      registers,
    });
    this.handlerErrors = new Counter({
      name: 'ticks_handler_errors_total',
      help: 'Deliveries whose handling failed (the entry stays pending and is retried).',
      registers,
    });
    this.xackCalls = new Counter({
      name: 'xack_calls_total',
      help: 'XACK commands sent by the consumer (batched acknowledgements).',
      registers,
    });
    this.xackErrors = new Counter({
      name: 'xack_errors_total',
      help: 'XACK commands that failed (they are retried).',
      registers,
    });
    this.ackBatchSize = new Histogram({
      name: 'ack_batch_size',
      help: 'Entry ids per XACK command.',
      buckets: [1, 10, 50, 100, 200, 300, 400, 500, 750, 1000],
      registers,
    });
    this.e2eLatency = new Histogram({
      name: 'tick_e2e_latency_seconds',
      help: 'From the XADD of a tick (its entry id time) to its candles being stored.',
      buckets: [
        0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15,
        0.2, 0.3, 0.5, 1, 2, 5, 10,
      ],
      registers,
    });
    this.published = new Counter({
      name: 'collector_ticks_published_total',
      help: 'Ticks published by the in-process collector.',
      registers,
    });
    new Gauge({
      name: 'ack_queue_size',
      help: 'Handled entries whose batched XACK is not sent yet.',
      registers,
      collect: () => {
        const g = this.registry.getSingleMetric('ack_queue_size') as Gauge;
        g.set(this.server?.pendingAcks ?? 0);
      },
    });
    new Gauge({
      name: 'handlers_in_flight',
      help: 'Stream entries being handled now.',
      registers,
      collect: () => {
        const g = this.registry.getSingleMetric('handlers_in_flight') as Gauge;
        g.set(this.server?.inFlightCount ?? 0);
      },
    });
  }

  /**
   * Counts the XACK commands of the server's command connection (and their sizes): every command
   * of an ioredis client goes through its `sendCommand`. Call after the server started.
   */
  instrument(server: ServerRedisStreams): void {
    this.server = server;
    const commands = server.unwrap<[Redis, Redis]>()[1] as Redis & {
      sendCommand: (command: any, stream?: unknown) => unknown;
    };
    const original = commands.sendCommand.bind(commands);
    commands.sendCommand = (command: any, stream?: unknown) => {
      if (command?.name === 'xack' && !this.counted.has(command)) {
        this.counted.add(command);
        const ids = Math.max(0, (command.args?.length ?? 2) - 2);
        (command.promise as Promise<unknown>).then(
          () => {
            this.xackCalls.inc();
            this.ackBatchSize.observe(ids);
          },
          () => {
            this.xackCalls.inc();
            this.xackErrors.inc();
          },
        );
      }
      return original(command, stream);
    };
  }

  /** Adds what the transport skipped since the last scrape. */
  private syncTransportDuplicates(): void {
    if (!this.server) return;
    const { duplicatesSkipped } = this.server.metrics();
    for (const layer of ['memory', 'redis'] as const) {
      const delta = duplicatesSkipped[layer] - this.transportSeen[layer];
      if (delta > 0) this.duplicatesSkipped.inc({ layer }, delta);
      this.transportSeen[layer] = duplicatesSkipped[layer];
    }
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }

  /** The value of a counter (summed over labels), for tests and the benchmark. */
  async value(name: string, labels?: Record<string, string>): Promise<number> {
    const metric = this.registry.getSingleMetric(name);
    if (!metric) return 0;
    const { values } = await metric.get();
    return values
      .filter((v) =>
        Object.entries(labels ?? {}).every(
          ([k, l]) => (v.labels as Record<string, unknown>)[k] === l,
        ),
      )
      .filter((v) => !('metricName' in v) || !String(v.metricName).endsWith('_bucket'))
      .reduce((sum, v) => sum + v.value, 0);
  }
}
