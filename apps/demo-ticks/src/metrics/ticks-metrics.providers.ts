/*
 * The app's Prometheus metrics with @willsoto/nestjs-prometheus. Each app has its own prom-client
 * Registry (passed to the metric providers, the default metrics and the /metrics controller)
 * rather than prom-client's global one, so that two apps in one process (the e2e tests) neither
 * share counters nor register the default metrics twice.
 */
import { Controller, DynamicModule, Get, Provider, Res, Type } from '@nestjs/common';
import {
  makeCounterProvider,
  makeGaugeProvider,
  makeHistogramProvider,
  PrometheusController,
  PrometheusModule,
} from '@willsoto/nestjs-prometheus';
import type { Counter, Gauge, Registry } from 'prom-client';
import type { Cluster, Redis } from 'ioredis';
import { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { configToken } from '../config/ticks-config.module';
import type { ConsumerSettings } from '../config/ticks-env.schema';
import { measureReclaimBacklog } from '../consumer/reclaim-backlog';
import { tickPlacement } from '../config/tick-streams';
import { TICKS_REDIS } from '../ticks.constants';

export const TICKS_METRICS_REGISTRY = Symbol('TICKS_METRICS_REGISTRY');

/** GET /metrics of one app: PrometheusController, serving the app's registry. */
function metricsControllerFor(registry: Registry): Type<PrometheusController> {
  @Controller()
  class TicksMetricsController extends PrometheusController {
    @Get()
    override async index(
      @Res({ passthrough: true }) response: { header(name: string, value: string): unknown },
    ): Promise<string> {
      response.header('Content-Type', registry.contentType);
      return registry.metrics();
    }
  }
  return TicksMetricsController;
}

/** PrometheusModule with prom-client's default metrics (process_*, nodejs_*), on GET /metrics. */
export function ticksPrometheusModule(registry: Registry): DynamicModule {
  return PrometheusModule.register({
    defaultMetrics: { enabled: true, config: { register: registry } },
    path: '/metrics',
    controller: metricsControllerFor(registry),
  });
}

/** The app-specific metrics, injectable with `@InjectMetric(name)`. */
export function ticksMetricProviders(registry: Registry): Provider[] {
  const registers = [registry];
  /** The transport's duplicate counts already added to ticks_duplicates_skipped_total. */
  const transportSeen = { memory: 0, redis: 0 };
  return [
    { provide: TICKS_METRICS_REGISTRY, useValue: registry },
    makeCounterProvider({
      name: 'ticks_handled_total',
      help: 'Ticks folded into candles (first application of a stream entry).',
      registers,
    }),
    makeCounterProvider({
      name: 'ticks_duplicates_skipped_total',
      help: 'Deliveries of a stream entry already applied: layer "memory" and "redis" = skipped by the transport\'s idempotency check (its in-process LRU, its Redis records), "effect" = caught by the candle script, which marks a record done in the same step as it applies the tick.',
      labelNames: ['layer'],
      registers,
      inject: [ServerRedisStreams],
      // Adds what the transport skipped since the last scrape.
      collect(this: Counter, server: ServerRedisStreams) {
        const { duplicatesSkipped } = server.metrics();
        for (const layer of ['memory', 'redis'] as const) {
          const delta = duplicatesSkipped[layer] - transportSeen[layer];
          if (delta > 0) this.inc({ layer }, delta);
          transportSeen[layer] = duplicatesSkipped[layer];
        }
      },
    }),
    makeCounterProvider({
      name: 'ticks_dead_lettered_total',
      help: 'Ticks the consumer moved to the dead-letter stream (invalid, outside the time window, or overflowing a candle volume).',
      labelNames: ['reason'],
      registers,
    }),
    makeCounterProvider({
      name: 'ticks_handler_errors_total',
      help: 'Batches whose handling failed (their entries stay pending and are retried).',
      registers,
    }),
    makeCounterProvider({
      name: 'xack_calls_total',
      help: 'XACK commands sent by the consumer (batched acknowledgements).',
      registers,
    }),
    makeCounterProvider({
      name: 'xack_errors_total',
      help: 'XACK commands that failed (they are retried).',
      registers,
    }),
    makeCounterProvider({
      name: 'collector_ticks_published_total',
      help: 'Ticks published by the in-process collector.',
      registers,
    }),
    makeHistogramProvider({
      name: 'ack_batch_size',
      help: 'Entry ids per XACK command.',
      buckets: [1, 10, 50, 100, 200, 300, 400, 500, 750, 1000],
      registers,
    }),
    makeHistogramProvider({
      name: 'tick_e2e_latency_seconds',
      help: 'From the XADD of a tick (its entry id time) to its candles being stored.',
      buckets: [
        0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15,
        0.2, 0.3, 0.5, 1, 2, 5, 10,
      ],
      registers,
    }),
    makeHistogramProvider({
      name: 'ticks_batch_duration_seconds',
      help: 'Time the consumer spent on one batch: validation, candle scripts, dead letters.',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    makeGaugeProvider({
      name: 'ack_queue_size',
      help: 'Handled entries whose batched XACK is not sent yet.',
      registers,
      inject: [ServerRedisStreams],
      collect(this: Gauge, server: ServerRedisStreams) {
        this.set(server.pendingAcks);
      },
    }),
    makeGaugeProvider({
      name: 'handlers_in_flight',
      help: 'Stream entries being handled now.',
      registers,
      inject: [ServerRedisStreams],
      collect(this: Gauge, server: ServerRedisStreams) {
        this.set(server.inFlightCount);
      },
    }),
    makeGaugeProvider({
      name: 'ticks_reclaim_backlog',
      help: 'Pending entries of consumers idle longer than CLAIM_MIN_IDLE_MS (crashed ones), waiting to be claimed (-1: could not be read).',
      registers,
      inject: [TICKS_REDIS, configToken('consumer')],
      async collect(this: Gauge, redis: Redis | Cluster, consumer: ConsumerSettings) {
        try {
          const { backlog } = await measureReclaimBacklog(redis, {
            stream: tickPlacement(consumer).streams,
            group: consumer.group,
            minIdleMs: consumer.claim.minIdleMs,
          });
          this.set(backlog);
        } catch {
          this.set(-1);
        }
      },
    }),
  ];
}
