/*
 * The OpenTelemetry setups that `--otel` compares, applied in the consumer process before the
 * transport is created:
 *   none  @opentelemetry/api cannot be resolved (as when it is not installed): no telemetry at all
 *   api   the API is installed, no SDK registered (the library's calls go to the API's no-ops)
 *   sdk   a MeterProvider with the Prometheus exporter as reader (no HTTP server: collected once at
 *         the end, as one scrape), and a tracer provider with a BatchSpanProcessor to an exporter
 *         that drops the spans; the AsyncLocalStorage context manager
 *   sdk-metrics  the MeterProvider with the Prometheus exporter only (no tracer provider)
 */
import Module from 'node:module';
import type { OtelMode } from './protocol';

export interface OtelSetup {
  /** sdk: one collection (a scrape) and the spans flushed; returns the size of the scrape, bytes. */
  finish(): Promise<number | undefined>;
}

export function setupOtel(mode: OtelMode | undefined): OtelSetup {
  if (mode === 'none') {
    const resolve = (Module as unknown as { _resolveFilename: (...a: unknown[]) => string })
      ._resolveFilename;
    (Module as unknown as { _resolveFilename: (...a: unknown[]) => string })._resolveFilename =
      function (this: unknown, request: unknown, ...rest: unknown[]) {
        if (request === '@opentelemetry/api')
          throw Object.assign(new Error("Cannot find module '@opentelemetry/api'"), {
            code: 'MODULE_NOT_FOUND',
          });
        return resolve.call(this, request, ...rest);
      };
    return { finish: () => Promise.resolve(undefined) };
  }
  if (mode !== 'sdk' && mode !== 'sdk-metrics') return { finish: () => Promise.resolve(undefined) };
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
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [
      new BatchSpanProcessor({
        export: (spans, done) => {
          exportedSpans += spans.length;
          done({ code: 0 });
        },
        shutdown: () => Promise.resolve(),
      }),
    ],
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
      return text.length;
    },
  };
}
