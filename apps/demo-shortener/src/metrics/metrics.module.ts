import { DynamicModule, Module } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { StampedeService } from '@nest-redis-resilience/stampede';
import type { MethodMetrics } from '@nest-redis-resilience/stampede';
import {
  makeCounterProvider,
  makeHistogramProvider,
  PrometheusModule,
} from '@willsoto/nestjs-prometheus';
import { Counter, Registry } from 'prom-client';
import {
  DB_LOOKUPS_TOTAL,
  DB_QUERY_DURATION_SECONDS,
  HTTP_REQUEST_DURATION_SECONDS,
  METRICS_REGISTRY,
  REDIRECTS_TOTAL,
} from './metrics.constants';
import { MetricsController } from './metrics.controller';
import { ShortenerMetrics } from './shortener-metrics';

/**
 * Prometheus names of the stampede counters (see MethodMetrics in @nest-redis-resilience/stampede),
 * with the factor to the exported unit (the library counts lock waits in ms; exported in seconds).
 */
const STAMPEDE_COUNTERS: Record<keyof MethodMetrics, [name: string, help: string, scale?: number]> =
  {
    calls: ['calls_total', 'Calls of the cached method'],
    hits: ['hits_total', 'Calls answered from the cache'],
    misses: ['misses_total', 'Calls that found no cached value'],
    loads: ['loads_total', 'Loader executions'],
    joins: ['joins_total', 'Calls that joined a load in flight in this process (single-flight)'],
    lockWaits: ['lock_waits_total', "Times a caller waited for another caller's lock"],
    lockWaitMs: ['lock_wait_seconds_total', 'Seconds spent waiting for locks', 1 / 1000],
    lockTimeouts: ['lock_timeouts_total', 'Lock waits that gave up and loaded without the lock'],
    earlyRecomputes: ['early_recomputes_total', 'XFetch recomputations before expiry'],
    l1Hits: ['l1_hits_total', 'Calls answered from the in-process tier'],
    staleServes: ['stale_serves_total', 'Calls served while a refresh ran, or stale within grace'],
    failSafes: ['fail_safes_total', 'Failed refreshes within grace: the stale value was kept'],
    timeouts: ['timeouts_total', 'Loads past their hard timeout'],
    errors: ['errors_total', 'Loader errors'],
    storeErrors: ['store_errors_total', 'Cache operations that failed (Redis down or slow)'],
  };

/** Request durations: from well under a millisecond (a cached redirect) to the timeouts. */
const HTTP_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/**
 * GET /metrics through @willsoto/nestjs-prometheus: the default process metrics
 * (process_*, nodejs_*), shortener_db_lookups_total, shortener_redirects_total, request and database call durations
 * (histograms, seconds), and the stampede counters of the cached lookup per method. Each app
 * gets its own Registry, so that two apps in one process (tests) do not share or clash.
 */
@Module({})
export class ShortenerMetricsModule {
  static forRoot(): DynamicModule {
    const registry = new Registry();
    const registers = [registry];
    const stampedeCounters = Object.entries(STAMPEDE_COUNTERS).map(([field, [name, help, scale]]) =>
      makeCounterProvider({
        name: `shortener_stampede_${name}`,
        help: `${help} (from @nest-redis-resilience/stampede)`,
        labelNames: ['method'],
        registers,
        // Looked up at scrape time: StampedeModule's options depend on the database, which
        // depends on these metrics, so StampedeService cannot be injected here.
        inject: [ModuleRef],
        // Read at scrape time from the library's own counters.
        collect(this: Counter<string>, moduleRef: ModuleRef) {
          const stampede = moduleRef.get(StampedeService, { strict: false });
          this.reset();
          for (const [method, m] of Object.entries(stampede.metrics())) {
            this.inc({ method }, m[field as keyof MethodMetrics] * (scale ?? 1));
          }
        },
      }),
    );
    const providers = [
      makeCounterProvider({
        name: DB_LOOKUPS_TOTAL,
        help: 'Lookups of a code in the database (cache misses, or every redirect with the cache off)',
        labelNames: ['result'],
        registers,
      }),
      makeCounterProvider({
        name: REDIRECTS_TOTAL,
        help: 'Redirects answered (302), from the cache or the database',
        registers,
      }),
      makeHistogramProvider({
        name: HTTP_REQUEST_DURATION_SECONDS,
        help: 'Duration of HTTP requests, from the first byte to the response sent',
        labelNames: ['method', 'route', 'status_code'],
        buckets: HTTP_BUCKETS,
        registers,
      }),
      makeHistogramProvider({
        name: DB_QUERY_DURATION_SECONDS,
        help: 'Duration of database calls (a transaction counts as one call)',
        labelNames: ['operation', 'outcome'],
        buckets: HTTP_BUCKETS,
        registers,
      }),
      ...stampedeCounters,
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
        ...providers,
        ShortenerMetrics,
      ],
      exports: [METRICS_REGISTRY, ShortenerMetrics],
    };
  }
}
