/*
 * The app's Prometheus metrics with @willsoto/nestjs-prometheus. Each app has its own prom-client
 * Registry (passed to the metric providers, the default metrics and the /metrics controller)
 * rather than prom-client's global one, so that two apps in one process (the e2e tests) neither
 * share counters nor register the default metrics twice. What the transport records itself
 * (deliveries, handler durations, XACKs, duplicates it skipped, in-flight entries, group lag and
 * pending) comes from @nest-redis-resilience/stream-batch-ack through OpenTelemetry
 * (otel-prometheus.ts) and follows the registry's text on GET /metrics.
 */
import { Controller, DynamicModule, Get, Provider, Res, Type } from '@nestjs/common';
import {
  makeCounterProvider,
  makeGaugeProvider,
  makeHistogramProvider,
  PrometheusController,
  PrometheusModule,
} from '@willsoto/nestjs-prometheus';
import type { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import type { Gauge, Registry } from 'prom-client';
import type { Cluster, Redis } from 'ioredis';
import { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { configToken } from '../config/ticks-config.module';
import type { ConsumerSettings } from '../config/ticks-env.schema';
import { measureReclaimBacklog } from '../consumer/reclaim-backlog';
import { tickPlacement } from '../redis/tick-streams';
import { TICKS_REDIS } from '../ticks.constants';
import { otelPrometheusText, registerOtelPrometheus } from './otel-prometheus';

export const TICKS_METRICS_REGISTRY = Symbol('TICKS_METRICS_REGISTRY');

/**
 * GET /metrics of one app: its registry (app metrics, process_*, nodejs_*), then the libraries'
 * metrics from the OpenTelemetry exporter (messaging_*, redis_streams_*, target_info). One text
 * format (0.0.4); the two parts have no metric name in common.
 */
function metricsControllerFor(
  registry: Registry,
  exporter: PrometheusExporter,
): Type<PrometheusController> {
  @Controller()
  class TicksMetricsController extends PrometheusController {
    @Get()
    override async index(
      @Res({ passthrough: true }) response: { header(name: string, value: string): unknown },
    ): Promise<string> {
      const [own, libraries] = await Promise.all([
        registry.metrics(),
        otelPrometheusText(exporter),
      ]);
      response.header('Content-Type', registry.contentType);
      return `${own.endsWith('\n') ? own : `${own}\n`}${libraries}`;
    }
  }
  return TicksMetricsController;
}

/**
 * PrometheusModule with prom-client's default metrics (process_*, nodejs_*), on GET /metrics,
 * with the exporter of the global MeterProvider (registered once per process, before the app is
 * created: ticks-app.factory.ts).
 */
export function ticksPrometheusModule(registry: Registry): DynamicModule {
  return PrometheusModule.register({
    defaultMetrics: { enabled: true, config: { register: registry } },
    path: '/metrics',
    controller: metricsControllerFor(registry, registerOtelPrometheus()),
  });
}

/**
 * The app-specific metrics, injectable with `@InjectMetric(name)`. The transport's own figures
 * are not copied here: see the README, "Metrics".
 */
export function ticksMetricProviders(registry: Registry): Provider[] {
  const registers = [registry];
  return [
    { provide: TICKS_METRICS_REGISTRY, useValue: registry },
    makeCounterProvider({
      name: 'ticks_handled_total',
      help: 'Ticks folded into candles (first application of a stream entry).',
      registers,
    }),
    makeCounterProvider({
      name: 'ticks_duplicates_skipped_total',
      help: 'Deliveries of a stream entry already applied that got past the transport\'s idempotency check and were caught by the candle script (layer "effect"), which marks a record done in the same step as it applies the tick. The transport\'s own skips: redis_streams_messages_duplicates_skipped_total.',
      labelNames: ['layer'],
      registers,
    }),
    makeCounterProvider({
      name: 'ticks_dead_lettered_total',
      help: 'Ticks the consumer moved to the dead-letter stream (invalid, outside the time window, or overflowing a candle volume).',
      labelNames: ['reason'],
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
    makeGaugeProvider({
      name: 'ack_queue_size',
      help: 'Handled entries whose batched XACK is not sent yet (server.pendingAcks).',
      registers,
      inject: [ServerRedisStreams],
      collect(this: Gauge, server: ServerRedisStreams) {
        this.set(server.pendingAcks);
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
