import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { PrometheusController } from '@willsoto/nestjs-prometheus';
import type { FastifyReply } from 'fastify';
import type { Registry } from 'prom-client';
import { METRICS_REGISTRY, OTEL_PROMETHEUS } from './metrics.constants';
import { otelPrometheusText } from './otel-prometheus';

/**
 * GET /metrics (the path PrometheusModule.register sets): the app's own registry rather than
 * prom-client's global one, which two apps in one process (tests) would share, then the
 * libraries' metrics from the OpenTelemetry exporter (stampede_*, target_info). One text format
 * (0.0.4); the two parts have no metric name in common.
 */
@Controller()
export class MetricsController extends PrometheusController {
  constructor(
    @Inject(METRICS_REGISTRY) private readonly registry: Registry,
    @Inject(OTEL_PROMETHEUS) private readonly exporter: PrometheusExporter,
  ) {
    super();
  }

  @Get()
  override async index(@Res({ passthrough: true }) response: FastifyReply): Promise<string> {
    const [own, libraries] = await Promise.all([
      this.registry.metrics(),
      otelPrometheusText(this.exporter),
    ]);
    void response.header('Content-Type', this.registry.contentType);
    return `${own.endsWith('\n') ? own : `${own}\n`}${libraries}`;
  }
}
