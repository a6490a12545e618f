import { Controller, Get, Header, Inject } from '@nestjs/common';
import { Registry } from 'prom-client';
import { TicksMetrics } from '../consumer/ticks.metrics';

@Controller('metrics')
export class MetricsController {
  constructor(@Inject(TicksMetrics) private readonly metrics: TicksMetrics) {}

  @Get()
  @Header('Content-Type', Registry.PROMETHEUS_CONTENT_TYPE)
  metricsText(): Promise<string> {
    return this.metrics.text();
  }
}
