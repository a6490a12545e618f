/* Plain data only: this file must not import @opentelemetry/api (an optional peer). */

/** The `telemetry` module option. Both default to on: they cost nothing until an SDK is registered. */
export interface TelemetryOptions {
  /** Counters and histograms through the OpenTelemetry metrics API. Default true. */
  metrics?: boolean;
  /** Spans through the OpenTelemetry trace API. Default true. */
  tracing?: boolean;
  /** Also a span for each call answered by the in-process tier (L1). Default false. */
  traceL1Hits?: boolean;
}

/** The meter's and the tracer's name (the package's name, with its version). */
export const STAMPEDE_INSTRUMENTATION_SCOPE = '@nest-redis-resilience/stampede';

/** The instruments' names (OpenTelemetry style; Prometheus shows `stampede_calls_total`...). */
export const STAMPEDE_METRICS = {
  calls: 'stampede.calls',
  hits: 'stampede.hits',
  misses: 'stampede.misses',
  loads: 'stampede.loads',
  joins: 'stampede.joins',
  lockWaits: 'stampede.lock.waits',
  lockWaitDuration: 'stampede.lock.wait.duration',
  lockTimeouts: 'stampede.lock.timeouts',
  earlyRecomputes: 'stampede.early_recomputes',
  staleServes: 'stampede.stale_serves',
  failSafes: 'stampede.failsafes',
  storeErrors: 'stampede.store.errors',
  loadTimeouts: 'stampede.load.timeouts',
  loadErrors: 'stampede.load.errors',
  loadDuration: 'stampede.load.duration',
} as const;
