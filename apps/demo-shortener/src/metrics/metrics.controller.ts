import { Controller, Get, Inject, Res } from '@nestjs/common';
import { PrometheusController } from '@willsoto/nestjs-prometheus';
import type { FastifyReply } from 'fastify';
import type { Registry } from 'prom-client';
import { METRICS_REGISTRY } from './metrics.constants';

/**
 * GET /metrics (the path PrometheusModule.register sets): the app's own registry rather than
 * prom-client's global one, which two apps in one process (tests) would share.
 */
@Controller()
export class MetricsController extends PrometheusController {
  constructor(@Inject(METRICS_REGISTRY) private readonly registry: Registry) {
    super();
  }

  @Get()
  override async index(@Res({ passthrough: true }) response: FastifyReply): Promise<string> {
    void response.header('Content-Type', this.registry.contentType);
    return this.registry.metrics();
  }
}
