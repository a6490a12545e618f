/*
 * The libraries' metrics on the app's GET /metrics: @nest-redis-resilience/stream-batch-ack
 * records through the OpenTelemetry metrics API, and takes its meter from the global
 * MeterProvider when ServerRedisStreams listens (ClientRedisStreams, the collector's: at its first
 * emit). So the app registers, once per process and before NestFactory.create
 * (ticks-app.factory.ts), a MeterProvider whose reader is a PrometheusExporter that starts no
 * server of its own; the app's /metrics controller appends the exporter's text to the app's
 * prom-client registry (ticks-metrics.providers.ts).
 */
import { Logger } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

/** The resource attribute `service.name` (the `target_info` series of /metrics). */
export const SERVICE_NAME = 'demo-ticks';

let registered: PrometheusExporter | undefined;

/**
 * Registers the global MeterProvider with a PrometheusExporter as its reader (no HTTP server of
 * its own) and returns the exporter; later calls in the same process return the same one. Call
 * it before the Nest app is created: a library that started before it records nothing.
 */
export function registerOtelPrometheus(): PrometheusExporter {
  if (registered) return registered;
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': SERVICE_NAME })),
    readers: [exporter],
  });
  if (!metrics.setGlobalMeterProvider(provider)) {
    // Someone registered a MeterProvider first (an app that embeds this one): the libraries
    // record there, and this exporter serves nothing but target_info.
    new Logger('Metrics').warn(
      'A global MeterProvider was registered before demo-ticks: its metrics are not on /metrics',
    );
  }
  registered = exporter;
  return exporter;
}

const serializer = new PrometheusSerializer();

/** What the exporter would serve on its own /metrics: collected now, Prometheus text format. */
export async function otelPrometheusText(exporter: PrometheusExporter): Promise<string> {
  const { resourceMetrics, errors } = await exporter.collect();
  if (errors.length > 0)
    new Logger('Metrics').warn(`OpenTelemetry collection errors: ${errors.map(String).join('; ')}`);
  return serializer.serialize(resourceMetrics);
}
