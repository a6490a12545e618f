import { Controller, Get, Header } from '@nestjs/common';
import { Registry } from 'prom-client';
import { ShortenerMetrics } from './shortener-metrics';

@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: ShortenerMetrics) {}

  @Get()
  @Header('Content-Type', Registry.PROMETHEUS_CONTENT_TYPE)
  scrape(): Promise<string> {
    return this.metrics.text();
  }
}
