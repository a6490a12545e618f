/**
 * The one place that loads `@opentelemetry/api`, an optional peer dependency. Without it (not
 * installed, or failing to load) every caller gets `null` and records nothing: the package works
 * the same, `server.metrics()` included. Only types are imported statically (erased at build).
 */
import type * as OtelApiModule from '@opentelemetry/api';

export type OtelApi = typeof OtelApiModule;

let loaded: { api: OtelApi | null } | undefined;

/** `@opentelemetry/api`, or null when it cannot be loaded. Resolved once per process. */
export function loadOtelApi(): OtelApi | null {
  if (!loaded) {
    try {
      loaded = { api: require('@opentelemetry/api') as OtelApi };
    } catch {
      loaded = { api: null };
    }
  }
  return loaded.api;
}

/** The meter and tracer name of this package, and its version. */
export const INSTRUMENTATION_NAME = '@nest-redis-resilience/stream-batch-ack';

export const INSTRUMENTATION_VERSION: string | undefined = (() => {
  try {
    // From src/telemetry and from dist/telemetry alike: the package root.
    return (require('../../package.json') as { version?: string }).version;
  } catch {
    return undefined;
  }
})();

/**
 * What is registered globally right now. The API's own no-op objects tell "no SDK": a meter equal
 * to `createNoopMeter()`, a tracer provider whose proxy delegates to the no-op provider.
 */
export class OtelProbe {
  private readonly noopTracerProvider: unknown;
  private tracerFor: unknown = null;
  private tracer: OtelApiModule.Tracer | null = null;

  constructor(readonly api: OtelApi) {
    this.noopTracerProvider = new api.ProxyTracerProvider().getDelegate();
  }

  /** This package's meter, or null when no MeterProvider is registered (no-op meter). */
  meter(): OtelApiModule.Meter | null {
    const meter = this.api.metrics.getMeter(INSTRUMENTATION_NAME, INSTRUMENTATION_VERSION);
    return meter === this.api.createNoopMeter() ? null : meter;
  }

  /** This package's tracer while a TracerProvider is registered, else null (a few property reads). */
  activeTracer(): OtelApiModule.Tracer | null {
    let provider: unknown = this.api.trace.getTracerProvider();
    if (provider instanceof this.api.ProxyTracerProvider) provider = provider.getDelegate();
    if (provider === this.noopTracerProvider) return null;
    if (provider !== this.tracerFor) {
      this.tracerFor = provider;
      this.tracer = (provider as OtelApiModule.TracerProvider).getTracer(
        INSTRUMENTATION_NAME,
        INSTRUMENTATION_VERSION,
      );
    }
    return this.tracer;
  }
}
