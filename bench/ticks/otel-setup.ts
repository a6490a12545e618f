/*
 * The OpenTelemetry setups that `--otel` compares, applied in the consumer before the transport
 * is created (see --help). sdk: no HTTP server, the Prometheus exporter is collected once at the
 * end (one scrape); the spans go through a BatchSpanProcessor to an exporter that drops them.
 */
import Module from 'node:module';
import type { OtelMode } from './protocol';

type Resolver = { _resolveFilename: (...a: unknown[]) => string };

/** finish(): sdk: one collection and the spans flushed, checked for the library's telemetry. */
export function setupOtel(mode: OtelMode | undefined): { finish(): Promise<void> } {
  const none = { finish: () => Promise.resolve() };
  if (mode === 'none') {
    // As when @opentelemetry/api is not installed.
    const resolve = (Module as unknown as Resolver)._resolveFilename;
    (Module as unknown as Resolver)._resolveFilename = function (this: unknown, request, ...rest) {
      if (request === '@opentelemetry/api')
        throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), {
          code: 'MODULE_NOT_FOUND',
        });
      return resolve.call(this, request, ...rest);
    };
  }
  if (mode !== 'sdk' && mode !== 'sdk-metrics') return none;
  const tracing = mode === 'sdk';
  const api = require('@opentelemetry/api') as typeof import('@opentelemetry/api');
  const { MeterProvider } =
    require('@opentelemetry/sdk-metrics') as typeof import('@opentelemetry/sdk-metrics');
  const { PrometheusExporter, PrometheusSerializer } =
    require('@opentelemetry/exporter-prometheus') as typeof import('@opentelemetry/exporter-prometheus');
  const { BasicTracerProvider, BatchSpanProcessor } =
    require('@opentelemetry/sdk-trace-base') as typeof import('@opentelemetry/sdk-trace-base');
  const { AsyncLocalStorageContextManager } =
    require('@opentelemetry/context-async-hooks') as typeof import('@opentelemetry/context-async-hooks');
  const prometheus = new PrometheusExporter({ preventServerStart: true });
  const meterProvider = new MeterProvider({ readers: [prometheus] });
  let exportedSpans = 0;
  const exporter = {
    export: (spans: unknown[], done: (r: { code: 0 }) => void) => {
      exportedSpans += spans.length;
      done({ code: 0 });
    },
    shutdown: () => Promise.resolve(),
  };
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new BatchSpanProcessor(exporter as never)],
  });
  api.metrics.setGlobalMeterProvider(meterProvider);
  if (tracing) {
    api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    api.trace.setGlobalTracerProvider(tracerProvider);
  }
  return {
    finish: async () => {
      const { resourceMetrics } = await prometheus.collect();
      const text = new PrometheusSerializer().serialize(resourceMetrics);
      await tracerProvider.forceFlush();
      if (tracing && exportedSpans === 0) throw new Error('--otel sdk: no span was exported');
      if (!text.includes('messaging_client_consumed_messages'))
        throw new Error('--otel sdk: the scrape lacks messaging.client.consumed.messages');
      await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
    },
  };
}
