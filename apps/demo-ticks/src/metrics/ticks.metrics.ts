import { Inject, Injectable } from '@nestjs/common';
import { InjectMetric } from '@willsoto/nestjs-prometheus';
import type { Redis } from 'ioredis';
import type { Counter, Histogram, Registry } from 'prom-client';
import type { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { TICKS_METRICS_REGISTRY } from './ticks-metrics.providers';

/** The metrics the app's code updates (the providers of ticks-metrics.providers.ts), and helpers. */
@Injectable()
export class TicksMetrics {
  private readonly counted = new WeakSet<object>();

  constructor(
    @Inject(TICKS_METRICS_REGISTRY) readonly registry: Registry,
    @InjectMetric('ticks_handled_total') readonly ticksHandled: Counter,
    @InjectMetric('ticks_duplicates_skipped_total') readonly duplicatesSkipped: Counter<'layer'>,
    @InjectMetric('ticks_dead_lettered_total') readonly deadLettered: Counter<'reason'>,
    @InjectMetric('ticks_handler_errors_total') readonly handlerErrors: Counter,
    @InjectMetric('xack_calls_total') readonly xackCalls: Counter,
    @InjectMetric('xack_errors_total') readonly xackErrors: Counter,
    @InjectMetric('collector_ticks_published_total') readonly published: Counter,
    @InjectMetric('ack_batch_size') readonly ackBatchSize: Histogram,
    @InjectMetric('tick_e2e_latency_seconds') readonly e2eLatency: Histogram,
    @InjectMetric('ticks_batch_duration_seconds') readonly batchDuration: Histogram,
  ) {}

  /**
   * Counts the XACK commands of the server's command connection (and their sizes): every command
   * of an ioredis client goes through its `sendCommand`. Call after the server started.
   */
  instrument(server: ServerRedisStreams): void {
    const commands = server.unwrap<[Redis, Redis]>()[1] as Redis & {
      sendCommand: (command: any, stream?: unknown) => unknown;
    };
    const original = commands.sendCommand.bind(commands);
    commands.sendCommand = (command: any, stream?: unknown) => {
      if (command?.name === 'xack' && !this.counted.has(command)) {
        this.counted.add(command);
        const ids = Math.max(0, (command.args?.length ?? 2) - 2);
        (command.promise as Promise<unknown>).then(
          () => {
            this.xackCalls.inc();
            this.ackBatchSize.observe(ids);
          },
          () => {
            this.xackCalls.inc();
            this.xackErrors.inc();
          },
        );
      }
      return original(command, stream);
    };
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
