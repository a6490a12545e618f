import { Inject, Injectable } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Counter, Histogram, Registry } from 'prom-client';
import { TICKS_METRICS_REGISTRY } from './ticks-metrics.providers';

/**
 * The metrics the app's code updates (the providers of ticks-metrics.providers.ts), and a reader.
 * The transport's own counters are read in process with `server.metrics()`.
 */
@Injectable()
export class TicksMetrics {
  constructor(
    @Inject(TICKS_METRICS_REGISTRY) readonly registry: Registry,
    @InjectMetric('ticks_handled_total') readonly ticksHandled: Counter,
    @InjectMetric('ticks_duplicates_skipped_total') readonly duplicatesSkipped: Counter<'layer'>,
    @InjectMetric('ticks_dead_lettered_total') readonly deadLettered: Counter<'reason'>,
    @InjectMetric('tick_e2e_latency_seconds') readonly e2eLatency: Histogram,
  ) {
    this.duplicatesSkipped.inc({ layer: 'effect' }, 0);
  }

  /** The value of a counter or gauge (summed over labels), for tests and the benchmark. */
  async value(name: string, labels?: Record<string, string>): Promise<number> {
    const metric = this.registry.getSingleMetric(name);
    if (!metric) return 0;
    const { values } = await metric.get();
    return values
      .filter((v) =>
        Object.entries(labels ?? {}).every(
          ([k, l]) => (v.labels as Record<string, unknown>)[k] === l,
        ),
      )
      .filter((v) => !('metricName' in v) || !String(v.metricName).endsWith('_bucket'))
      .reduce((sum, v) => sum + v.value, 0);
  }
}
