import type {
  Attributes,
  BatchObservableResult,
  Histogram,
  MeterProvider,
  ObservableCounter,
  Span,
  SpanOptions,
  Tracer,
} from '@opentelemetry/api';
import { keyPattern } from '../core/events';
import { emptyMetrics, MethodMetrics } from '../core/metrics';
import {
  CounterSource,
  FlowTelemetry,
  HitTier,
  MethodTelemetry,
  noTelemetry,
  TracedCall,
} from '../core/telemetry';
import { otelApi, OtelApiModule } from './otel-api';
import {
  STAMPEDE_INSTRUMENTATION_SCOPE,
  STAMPEDE_METRICS,
  TelemetryOptions,
} from './telemetry.options';

const ATTR_METHOD = 'stampede.method';
const ATTR_TIER = 'stampede.tier';
const ATTR_KEY_PATTERN = 'stampede.key_pattern';

/** Seconds: from a millisecond lock wait or cache-speed load to a 30 s crawl. */
const SECONDS_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

/**
 * The counters, read from the flow's own counters (those of `StampedeService.metrics()`) when
 * the SDK collects. The flow pays nothing per call for them, and they cannot disagree with
 * `metrics()`. `hits` is split by tier: `l1`, and `store` (hits that read the store).
 */
const COUNTERS: {
  name: string;
  unit: string;
  description: string;
  read: (c: MethodMetrics) => number;
}[] = [
  { name: STAMPEDE_METRICS.calls, unit: '{call}', description: 'Calls', read: (c) => c.calls },
  {
    name: STAMPEDE_METRICS.misses,
    unit: '{call}',
    description: 'Calls that found no cached value',
    read: (c) => c.misses,
  },
  {
    name: STAMPEDE_METRICS.loads,
    unit: '{load}',
    description: 'Loader executions',
    read: (c) => c.loads,
  },
  {
    name: STAMPEDE_METRICS.joins,
    unit: '{call}',
    description: 'Calls that joined an execution in flight in this process (single-flight)',
    read: (c) => c.joins,
  },
  {
    name: STAMPEDE_METRICS.lockWaits,
    unit: '{wait}',
    description: "Waits for another caller's lock",
    read: (c) => c.lockWaits,
  },
  {
    name: STAMPEDE_METRICS.lockTimeouts,
    unit: '{wait}',
    description: 'Lock waits that gave up and loaded without the lock',
    read: (c) => c.lockTimeouts,
  },
  {
    name: STAMPEDE_METRICS.earlyRecomputes,
    unit: '{load}',
    description: 'Recomputations started before expiry (XFetch)',
    read: (c) => c.earlyRecomputes,
  },
  {
    name: STAMPEDE_METRICS.staleServes,
    unit: '{call}',
    description: 'Calls served a stale value (grace) or the current one while it was recomputed',
    read: (c) => c.staleServes,
  },
  {
    name: STAMPEDE_METRICS.failSafes,
    unit: '{refresh}',
    description: 'Refreshes within grace that failed: callers kept the stale value',
    read: (c) => c.failSafes,
  },
  {
    name: STAMPEDE_METRICS.storeErrors,
    unit: '{error}',
    description: 'Store operations that failed (the call fell back to held values or the loader)',
    read: (c) => c.storeErrors,
  },
  {
    name: STAMPEDE_METRICS.loadTimeouts,
    unit: '{load}',
    description: 'Loads past the hard timeout (callers got a StampedeTimeoutError)',
    read: (c) => c.timeouts,
  },
  {
    name: STAMPEDE_METRICS.loadErrors,
    unit: '{error}',
    description: 'Loader errors',
    read: (c) => c.errors,
  },
];

/** Attribute objects of one method label, made once and shared by every record. */
interface LabelAttributes {
  method: Attributes;
  l1: Attributes;
  store: Attributes;
}

function labelAttributes(label: string): LabelAttributes {
  return {
    method: { [ATTR_METHOD]: label },
    l1: { [ATTR_METHOD]: label, [ATTR_TIER]: 'l1' },
    store: { [ATTR_METHOD]: label, [ATTR_TIER]: 'store' },
  };
}

/**
 * The instruments of one MeterProvider, made once per process, and the counters of every engine
 * that reports to it. Apps of one process (as in e2e tests) report the same methods: their
 * counts are summed per label, and an app that closes leaves its counts behind, so the exported
 * counters never go down.
 */
class MeterHub {
  readonly lockWait: Histogram;
  readonly loadDuration: Histogram;
  private readonly sources = new Set<CounterSource>();
  private readonly retired = new Map<string, MethodMetrics>();
  private readonly attributes = new Map<string, LabelAttributes>();

  constructor(provider: MeterProvider, version: string | undefined) {
    const meter = provider.getMeter(STAMPEDE_INSTRUMENTATION_SCOPE, version);
    const advice = { explicitBucketBoundaries: SECONDS_BUCKETS };
    this.lockWait = meter.createHistogram(STAMPEDE_METRICS.lockWaitDuration, {
      unit: 's',
      description: "Time spent waiting for another caller's lock",
      advice,
    });
    this.loadDuration = meter.createHistogram(STAMPEDE_METRICS.loadDuration, {
      unit: 's',
      description: 'Loader run time',
      advice,
    });
    const hits = meter.createObservableCounter(STAMPEDE_METRICS.hits, {
      unit: '{call}',
      description: 'Calls answered from the cache, by tier (l1, store)',
    });
    const counters = COUNTERS.map((c) => ({
      read: c.read,
      instrument: meter.createObservableCounter(c.name, {
        unit: c.unit,
        description: c.description,
      }),
    }));
    const observables: ObservableCounter[] = [hits, ...counters.map((c) => c.instrument)];
    meter.addBatchObservableCallback((result: BatchObservableResult) => {
      for (const [label, c] of this.totals()) {
        const a = this.attributesOf(label);
        result.observe(hits, c.l1Hits, a.l1);
        result.observe(hits, c.hits - c.l1Hits, a.store);
        for (const counter of counters)
          result.observe(counter.instrument, counter.read(c), a.method);
      }
    }, observables);
  }

  attributesOf(label: string): LabelAttributes {
    let a = this.attributes.get(label);
    if (!a) this.attributes.set(label, (a = labelAttributes(label)));
    return a;
  }

  observe(source: CounterSource): () => void {
    this.sources.add(source);
    return () => {
      if (!this.sources.delete(source)) return;
      for (const e of source.entries()) add(this.retired, e.label, e.counts);
    };
  }

  /** Counts per label, over every engine, closed ones included. */
  private totals(): Map<string, MethodMetrics> {
    const totals = new Map<string, MethodMetrics>();
    for (const [label, counts] of this.retired) add(totals, label, counts);
    for (const source of this.sources) {
      for (const e of source.entries()) add(totals, e.label, e.counts);
    }
    return totals;
  }
}

function add(into: Map<string, MethodMetrics>, label: string, counts: MethodMetrics): void {
  let sum = into.get(label);
  if (!sum) into.set(label, (sum = emptyMetrics()));
  for (const k of Object.keys(counts) as (keyof MethodMetrics)[]) sum[k] += counts[k];
}

const hubs = new WeakMap<MeterProvider, MeterHub>();

function hubOf(provider: MeterProvider): MeterHub {
  let hub = hubs.get(provider);
  if (!hub) hubs.set(provider, (hub = new MeterHub(provider, packageVersion())));
  return hub;
}

let version: string | undefined | null = null;

/** This package's version (from its package.json, in src/ and in dist/ alike). */
function packageVersion(): string | undefined {
  if (version === null) {
    try {
      version = (require('../../package.json') as { version?: string }).version;
    } catch {
      version = undefined;
    }
  }
  return version;
}

/**
 * The telemetry of the module options: OpenTelemetry when `@opentelemetry/api` is installed and
 * not switched off, else none. The meter is taken from the global MeterProvider now: register
 * the SDK before the Nest app is created (the tracer follows a later registration).
 */
export function createTelemetry(options: TelemetryOptions = {}): FlowTelemetry {
  const metrics = options.metrics !== false;
  const tracing = options.tracing !== false;
  if (!metrics && !tracing) return noTelemetry;
  const api = otelApi();
  if (!api) return noTelemetry;
  return new OtelTelemetry(api, metrics, tracing, options.traceL1Hits === true);
}

class OtelTelemetry implements FlowTelemetry {
  private readonly hub?: MeterHub;
  private readonly tracer?: Tracer;
  private readonly methods = new Map<string, OtelMethod>();

  constructor(
    private readonly api: OtelApiModule,
    metrics: boolean,
    tracing: boolean,
    readonly traceL1Hits: boolean,
  ) {
    if (metrics) this.hub = hubOf(api.metrics.getMeterProvider());
    if (tracing)
      this.tracer = api.trace.getTracer(STAMPEDE_INSTRUMENTATION_SCOPE, packageVersion());
  }

  method(label: string): MethodTelemetry {
    let m = this.methods.get(label);
    if (!m) this.methods.set(label, (m = new OtelMethod(this.api, label, this.hub, this.tracer)));
    return m;
  }

  observe(source: CounterSource): () => void {
    return this.hub ? this.hub.observe(source) : () => undefined;
  }
}

class OtelMethod implements MethodTelemetry {
  private readonly attributes: Attributes;
  private readonly callName: string;
  private readonly refreshName: string;
  /** The span options of the last key pattern seen (a method's keys mostly share one). */
  private prefix = '';
  private spanOptions?: SpanOptions;

  constructor(
    private readonly api: OtelApiModule,
    private readonly label: string,
    private readonly hub: MeterHub | undefined,
    private readonly tracer: Tracer | undefined,
  ) {
    this.attributes = hub ? hub.attributesOf(label).method : { [ATTR_METHOD]: label };
    this.callName = `stampede.get_or_load ${label}`;
    this.refreshName = `stampede.refresh ${label}`;
  }

  start(key: string, refresh = false): TracedCall | undefined {
    if (!this.tracer) return undefined;
    // `Class.method:*` stands for every key that starts with `Class.method:`: a prefix test
    // per call, no string made, unless the key's pattern changed.
    if (!this.spanOptions || this.prefix === '' || !key.startsWith(this.prefix)) {
      const pattern = keyPattern(key);
      this.prefix = pattern.slice(0, -1); // '' for '*'
      this.spanOptions = {
        kind: this.api.SpanKind.INTERNAL,
        attributes: { [ATTR_METHOD]: this.label, [ATTR_KEY_PATTERN]: pattern },
      };
    }
    const span = this.tracer.startSpan(
      refresh ? this.refreshName : this.callName,
      this.spanOptions,
    );
    // Without an SDK (or sampled out) there is nothing to record and no context to pass on.
    if (!span.isRecording()) return undefined;
    return new OtelCall(this.api, span);
  }

  lockWaited(ms: number): void {
    this.hub?.lockWait.record(ms / 1000, this.attributes);
  }

  loaded(ms: number): void {
    this.hub?.loadDuration.record(ms / 1000, this.attributes);
  }
}

class OtelCall implements TracedCall {
  constructor(
    private readonly api: OtelApiModule,
    private readonly span: Span,
  ) {}

  run<R>(fn: () => R): R {
    const { context, trace } = this.api;
    return context.with(trace.setSpan(context.active(), this.span), fn);
  }

  end(tier: HitTier, lockWaited: boolean, loaded: boolean, joined: boolean, error?: unknown): void {
    const span = this.span;
    span.setAttributes({
      'stampede.hit_tier': tier,
      'stampede.lock_waited': lockWaited,
      'stampede.loaded': loaded,
    });
    if (joined) span.setAttribute('stampede.joined', true);
    if (error !== undefined) {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({
        code: this.api.SpanStatusCode.ERROR,
        message: error instanceof Error ? error.message : String(error),
      });
    }
    span.end();
  }
}
