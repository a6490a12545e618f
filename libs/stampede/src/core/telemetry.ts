import type { MethodMetrics } from './metrics';

/** Where a call's value came from: the in-process tier, the store, or neither (a load). */
export type HitTier = 'l1' | 'store' | 'none';

/** A traced call or background refresh (a span), ended once. */
export interface TracedCall {
  /** Runs `fn` with the span as the active context: spans the loader makes become its children. */
  run<R>(fn: () => R): R;
  /** Ends the span with what happened; with `error`, as failed. */
  end(tier: HitTier, lockWaited: boolean, loaded: boolean, joined: boolean, error?: unknown): void;
}

/** Counters by method, with the label each is exported under (a MetricsRegistry). */
export interface CounterSource {
  entries(): Iterable<{ readonly label: string; readonly counts: MethodMetrics }>;
}

/** The telemetry of one method (one label), bound once: no work per call beyond the records. */
export interface MethodTelemetry {
  /** A span for a call of `key` (or its background refresh), or undefined when not traced. */
  start(key: string, refresh?: boolean): TracedCall | undefined;
  /** A lock wait ended after `ms`. */
  lockWaited(ms: number): void;
  /** A loader ran for `ms` (whether it succeeded or threw). */
  loaded(ms: number): void;
}

/**
 * What the flow reports beyond its counters. The core sees only this interface; the
 * OpenTelemetry implementation is telemetry/otel-telemetry.ts, loaded only when wanted.
 */
export interface FlowTelemetry {
  /** Also trace calls answered by the in-process tier. */
  readonly traceL1Hits: boolean;
  /** The handle of one method, made once per label. */
  method(label: string): MethodTelemetry;
  /** Exports the counters of `source` until the returned function is called. */
  observe(source: CounterSource): () => void;
}

const noMethod: MethodTelemetry = {
  start: () => undefined,
  lockWaited: () => undefined,
  loaded: () => undefined,
};

/** Telemetry off: nothing but the counters of `StampedeService.metrics()`. */
export const noTelemetry: FlowTelemetry = {
  traceL1Hits: false,
  method: () => noMethod,
  observe: () => () => undefined,
};
