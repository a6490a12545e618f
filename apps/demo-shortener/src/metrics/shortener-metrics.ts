import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { FastifyInstance } from 'fastify';
import type { Counter, Histogram } from 'prom-client';
import {
  DB_LOOKUPS_TOTAL,
  DB_QUERY_DURATION_SECONDS,
  HTTP_REQUEST_DURATION_SECONDS,
  REDIRECTS_TOTAL,
} from './metrics.constants';

/**
 * What the app records itself: database lookups of codes, redirects, the duration of each HTTP
 * request (a Fastify onResponse hook, so that errors answered before any handler count too) and
 * of each database call. The stampede library records its own (otel-prometheus.ts).
 */
@Injectable()
export class ShortenerMetrics implements OnModuleInit {
  constructor(
    @InjectMetric(DB_LOOKUPS_TOTAL) private readonly dbLookups: Counter<'result'>,
    @InjectMetric(REDIRECTS_TOTAL) private readonly redirects: Counter,
    @InjectMetric(HTTP_REQUEST_DURATION_SECONDS)
    private readonly httpDuration: Histogram<'method' | 'route' | 'status_code'>,
    @InjectMetric(DB_QUERY_DURATION_SECONDS)
    private readonly dbDuration: Histogram<'operation' | 'outcome'>,
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
  ) {
    this.dbLookups.inc({ result: 'found' }, 0);
    this.dbLookups.inc({ result: 'not_found' }, 0);
  }

  onModuleInit(): void {
    const fastify = this.adapterHost.httpAdapter?.getInstance<FastifyInstance>();
    fastify?.addHook('onResponse', (request, reply, done) => {
      this.httpDuration.observe(
        {
          method: request.method,
          // The route pattern (/:code), never the path: one series per route, not per code.
          route: request.routeOptions.url ?? 'unmatched',
          status_code: String(reply.statusCode),
        },
        reply.elapsedTime / 1000,
      );
      done();
    });
  }

  countLookup(found: boolean): void {
    this.dbLookups.inc({ result: found ? 'found' : 'not_found' });
  }

  countRedirect(): void {
    this.redirects.inc();
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
