import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { FastifyInstance } from 'fastify';
import { Counter, Histogram, Registry } from 'prom-client';
import {
  DB_LOOKUPS_TOTAL,
  DB_QUERY_DURATION_SECONDS,
  DURATION_BUCKETS,
  HTTP_REQUEST_DURATION_SECONDS,
  METRICS_REGISTRY,
  REDIRECTS_TOTAL,
} from './metrics.constants';
import { RequestDurations } from './request-durations';

/**
 * What the app records itself: database lookups of codes, redirects, the duration of each HTTP
 * request (a Fastify onResponse hook, so that errors answered before any handler count too) and
 * of each database call. The stampede library records its own (otel-prometheus.ts).
 *
 * What every request records (a redirect, its duration) is counted in the process and read by
 * prom-client when the metrics are read (see RequestDurations).
 */
@Injectable()
export class ShortenerMetrics implements OnModuleInit {
  private readonly redirects: Counter;
  private redirectsPending = 0;
  private readonly durations: RequestDurations;

  constructor(
    @InjectMetric(DB_LOOKUPS_TOTAL) private readonly dbLookups: Counter<'result'>,
    @InjectMetric(DB_QUERY_DURATION_SECONDS)
    private readonly dbDuration: Histogram<'operation' | 'outcome'>,
    @Inject(METRICS_REGISTRY) registry: Registry,
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
  ) {
    this.dbLookups.inc({ result: 'found' }, 0);
    this.dbLookups.inc({ result: 'not_found' }, 0);
    // Both fold what the process noted in when they are read (`collect`, before every scrape).
    this.redirects = new Counter({
      name: REDIRECTS_TOTAL,
      help: 'Redirects answered (302), from the cache or the database',
      registers: [registry],
      collect: () => {
        this.redirects.inc(this.redirectsPending);
        this.redirectsPending = 0;
      },
    });
    this.durations = new RequestDurations(
      HTTP_REQUEST_DURATION_SECONDS,
      'Duration of HTTP requests, from the first byte to the response sent',
      DURATION_BUCKETS,
    );
    registry.registerMetric(this.durations.asMetric());
  }

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    fastify?.addHook('onResponse', (request, reply, done) => {
      this.durations.record(
        request.method,
        // The route pattern (/:code), never the path: one series per route, not per code.
        request.routeOptions.url ?? 'unmatched',
        reply.statusCode,
        reply.elapsedTime / 1000,
      );
      done();
    });
  }

  countLookup(found: boolean): void {
    this.dbLookups.inc({ result: found ? 'found' : 'not_found' });
  }

  countRedirect(): void {
    this.redirectsPending++;
  }

  /** Redirects answered since start-up. */
  async redirectCount(): Promise<number> {
    const { values } = await this.redirects.get();
    return values.reduce((sum, v) => sum + v.value, 0);
  }

  /** For GuardedUrlRepository's observer. */
  observeQuery(operation: string, seconds: number, failed: boolean): void {
    this.dbDuration.observe({ operation, outcome: failed ? 'error' : 'ok' }, seconds);
  }

  /** Database lookups since start-up (what tests and benchmarks compare). */
  async dbLookupCount(): Promise<number> {
    const { values } = await this.dbLookups.get();
    return values.reduce((sum, v) => sum + v.value, 0);
  }
}
