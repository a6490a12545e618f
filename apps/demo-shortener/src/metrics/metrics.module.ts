import { DynamicModule, Module } from '@nestjs/common';
import {
  makeCounterProvider,
  makeHistogramProvider,
  PrometheusModule,
} from '@willsoto/nestjs-prometheus';
import { Registry } from 'prom-client';
import {
  DB_LOOKUPS_TOTAL,
  DB_QUERY_DURATION_SECONDS,
  DURATION_BUCKETS,
  METRICS_REGISTRY,
  OTEL_PROMETHEUS,
} from './metrics.constants';
import { MetricsController } from './metrics.controller';
import { registerOtelPrometheus } from './otel-prometheus';
import { ShortenerMetrics } from './shortener-metrics';

/**
 * GET /metrics: this app's prom-client registry, through @willsoto/nestjs-prometheus (the default
 * process_* and nodejs_* metrics, shortener_db_lookups_total, shortener_redirects_total, request
 * and database call durations in seconds), followed by what the libraries record through
 * OpenTelemetry (stampede_*, from the exporter of otel-prometheus.ts). Each app gets its own
 * Registry, so that two apps in one process (tests) do not share or clash.
 */
@Module({})
export class ShortenerMetricsModule {
  static forRoot(): DynamicModule {
    const registry = new Registry();
    const registers = [registry];
    const providers = [
      makeCounterProvider({
        name: DB_LOOKUPS_TOTAL,
        help: 'Lookups of a code in the database (cache misses, or every redirect with the cache off)',
        labelNames: ['result'],
        registers,
      }),
      makeHistogramProvider({
        name: DB_QUERY_DURATION_SECONDS,
        help: 'Duration of database calls (a transaction counts as one call)',
        labelNames: ['operation', 'outcome'],
        buckets: DURATION_BUCKETS,
        registers,
      }),
    ];
    return {
      module: ShortenerMetricsModule,
      global: true,
      imports: [
        PrometheusModule.register({
          path: '/metrics',
          controller: MetricsController,
          defaultMetrics: { enabled: true, config: { register: registry } },
        }),
      ],
      providers: [
        { provide: METRICS_REGISTRY, useValue: registry },
        // Registered by createShortenerApp before the app is created; the same exporter here.
        { provide: OTEL_PROMETHEUS, useFactory: registerOtelPrometheus },
        ...providers,
        ShortenerMetrics,
      ],
      exports: [METRICS_REGISTRY, OTEL_PROMETHEUS, ShortenerMetrics],
    };
  }
}
