/*
 * One round of the otel scenario (otel.ts), in a process of its own. For each variant (a
 * phase), two apps run side by side on the same hot set: one with `telemetry: { metrics: false,
 * tracing: false }` ("off") and one with the defaults ("on"). They take turns in short slices
 * (off, on, on, off, ...): on a busy machine, throughput drifts far more between runs than
 * between two neighbouring slices. Config comes in OTEL_BENCH; the answer is one IPC message.
 *
 * Variants (what is registered while the two apps run): api = nothing (@opentelemetry/api's
 * no-op meter and tracer); sdk = a MeterProvider read by a Prometheus exporter (no server;
 * collected once at the end of the phase) and a tracer provider (every span sampled) whose batch
 * processor hands spans to an exporter that drops them; sdk-sampled = sdk with a
 * ParentBased(TraceIdRatio 0.1) sampler; sdk-metrics = the MeterProvider alone; sdk-als = sdk
 * plus the AsyncLocalStorage context manager that NodeSDK registers.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResult, ExportResultCode } from '@opentelemetry/core';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import {
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  ReadableSpan,
  SpanExporter,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import {
  Cacheable,
  DistLock,
  SingleFlight,
  StampedeModule,
  StampedeModuleOptions,
} from '@nest-redis-resilience/stampede';
import { zipfSampler } from './load';
import { failToParent } from '../shared/child';

export type OtelVariant = 'api' | 'sdk' | 'sdk-sampled' | 'sdk-metrics' | 'sdk-als';
export type OtelTier = 'store' | 'l1';

export interface OtelWorkerConfig {
  variants: OtelVariant[];
  tiers: OtelTier[];
  redisUrl: string;
  prefix: string;
  keys: number;
  zipf: number;
  concurrency: number;
  /** Per app: warm-up, then measured time, both in slices of sliceMs. */
  warmupMs: number;
  durationMs: number;
  sliceMs: number;
}

/** Calls, ms, and CPU time of this process during the app's slices per call (us). */
type Measured = { calls: number; ms: number; cpuUs: number };

export interface OtelWorkerReply {
  results: { variant: OtelVariant; tier: OtelTier; off: Measured; on: Measured }[];
  /** sdk variants: the one Prometheus collection at the end of the phase. */
  prometheus?: { bytes: number; series: number; collectMs: number };
}

class DroppingExporter implements SpanExporter {
  export(_spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    done({ code: ExportResultCode.SUCCESS });
  }
  async shutdown(): Promise<void> {}
}

@Injectable()
class HotSet {
  private readonly payload = 'x'.repeat(200);

  @Cacheable({ ttl: 600_000 })
  @SingleFlight()
  @DistLock()
  async get(key: string): Promise<{ key: string; payload: string }> {
    return { key, payload: this.payload };
  }
}

/** Runs `concurrency` callers for `ms`; adds what it did to `into`. */
async function slice(
  hot: HotSet,
  keys: string[],
  next: () => number,
  concurrency: number,
  ms: number,
  into: Measured,
): Promise<void> {
  let calls = 0;
  const cpu = process.cpuUsage();
  const start = performance.now();
  const end = start + ms;
  const caller = async () => {
    while (performance.now() < end) {
      await hot.get(keys[next()]);
      calls++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, caller));
  const used = process.cpuUsage(cpu);
  into.calls += calls;
  into.ms += performance.now() - start;
  into.cpuUs += used.user + used.system; // total here; per call at the end
}

interface Sdk {
  prometheus: PrometheusExporter;
  meterProvider: MeterProvider;
  tracerProvider?: BasicTracerProvider;
}

function registerSdk(variant: OtelVariant): Sdk | undefined {
  if (variant === 'api') return undefined;
  if (variant === 'sdk-als') {
    // What NodeSDK also registers; on Node 20 it turns on promise hooks for the whole process.
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  }
  const prometheus = new PrometheusExporter({ preventServerStart: true });
  const meterProvider = new MeterProvider({ readers: [prometheus] });
  metrics.setGlobalMeterProvider(meterProvider);
  let tracerProvider: BasicTracerProvider | undefined;
  if (variant !== 'sdk-metrics') {
    tracerProvider = new BasicTracerProvider({
      spanProcessors: [new BatchSpanProcessor(new DroppingExporter())],
      sampler:
        variant === 'sdk-sampled'
          ? new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.1) })
          : new AlwaysOnSampler(),
    });
    trace.setGlobalTracerProvider(tracerProvider);
  }
  return { prometheus, meterProvider, tracerProvider };
}

async function startApp(options: StampedeModuleOptions) {
  @Module({ imports: [StampedeModule.forRoot(options)], providers: [HotSet] })
  class HotSetModule {}
  const app = await NestFactory.createApplicationContext(HotSetModule, { logger: false });
  return { app, hot: app.get(HotSet) };
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.OTEL_BENCH!) as OtelWorkerConfig;
  const keys = Array.from({ length: cfg.keys }, (_, i) => `k${i}`);
  const reply: OtelWorkerReply = { results: [] };
  for (const variant of cfg.variants) {
    const sdk = registerSdk(variant);
    for (const tier of cfg.tiers) {
      const base = {
        redis: cfg.redisUrl,
        keyPrefix: `${cfg.prefix}${variant}:${tier}:`,
        l1: tier === 'l1',
      };
      const apps = [
        await startApp({ ...base, telemetry: { metrics: false, tracing: false } }),
        await startApp(base), // the same keys: it finds them in Redis (or loads them once)
      ];
      // Every key cached.
      for (const { hot } of apps)
        for (let i = 0; i < keys.length; i += 200)
          await Promise.all(keys.slice(i, i + 200).map((k) => hot.get(k)));
      const next = zipfSampler(cfg.keys, cfg.zipf);
      const zero = (): Measured => ({ calls: 0, ms: 0, cpuUs: 0 });
      const [scratch, measured] = [zero(), [zero(), zero()]];
      const turns = (total: number) => Math.max(1, Math.round(total / cfg.sliceMs));
      for (let t = 0; t < turns(cfg.warmupMs); t++) {
        for (const { hot } of apps)
          await slice(hot, keys, next, cfg.concurrency, cfg.sliceMs, scratch);
      }
      for (let t = 0; t < turns(cfg.durationMs); t++) {
        const order = t % 2 === 0 ? [0, 1] : [1, 0];
        for (const i of order)
          await slice(apps[i].hot, keys, next, cfg.concurrency, cfg.sliceMs, measured[i]);
      }
      const [off, on] = measured.map((m) => ({ ...m, cpuUs: m.cpuUs / m.calls }));
      reply.results.push({ variant, tier, off, on });
      for (const { app } of apps) await app.close();
    }
    if (sdk) {
      const started = performance.now();
      const { resourceMetrics } = await sdk.prometheus.collect();
      const text = new PrometheusSerializer().serialize(resourceMetrics);
      const collectMs = performance.now() - started;
      if (!text.includes('stampede_calls_total{')) throw new Error('no stampede_calls_total');
      const series = text.split('\n').filter((l) => l.startsWith('stampede_')).length;
      reply.prometheus = { bytes: text.length, series, collectMs };
      await sdk.tracerProvider?.shutdown();
      await sdk.meterProvider.shutdown();
      metrics.disable();
      trace.disable();
      context.disable();
    }
  }
  process.send!({ type: 'result', ...reply }, () => process.disconnect());
}

main().catch(failToParent);
