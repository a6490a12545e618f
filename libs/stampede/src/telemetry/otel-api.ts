import type * as OtelApi from '@opentelemetry/api';

/** `@opentelemetry/api`, an optional peer dependency: only its types are imported statically. */
export type OtelApiModule = typeof OtelApi;

let loaded: OtelApiModule | null | undefined;

/**
 * The OpenTelemetry API when it is installed, else undefined (then telemetry is off and the rest
 * of the library works as before). Required once, on first use, and cached.
 */
export function otelApi(): OtelApiModule | undefined {
  if (loaded === undefined) {
    try {
      loaded = require('@opentelemetry/api') as OtelApiModule;
    } catch {
      loaded = null;
    }
  }
  return loaded ?? undefined;
}
