/*
 * One run of the otel scenario (otel.ts) in a process of its own, so that a registered SDK, the
 * JIT's view of the call sites and the heap of one variant never touch another. Config comes in
 * OTEL_BENCH; the answer is one IPC message { results, prometheus } or { error }.
 *
 * Variants: none = telemetry: { metrics: false, tracing: false }; api = the defaults with
 * @opentelemetry/api installed but no SDK registered; sdk = a MeterProvider read by a Prometheus
 * exporter (no server; collected once at the end) and a tracer provider (every span sampled)
 * whose batch processor hands spans to an exporter that drops them; sdk-sampled = sdk with a
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
  TraceIdRatioBasedSampler,
  ReadableSpan,
  SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import {
  Cacheable,
  DistLock,
  SingleFlight,
  StampedeModule,
  StampedeModuleOptions,
} from '@nest-redis-resilience/stampede';
import { zipfSampler } from './load';

export type OtelVariant = 'none' | 'api' | 'sdk' | 'sdk-sampled' | 'sdk-metrics' | 'sdk-als';
export type OtelTier = 'store' | 'l1';

export interface OtelWorkerConfig {
  variant: OtelVariant;
  tiers: OtelTier[];
  redisUrl: string;
  prefix: string;
  keys: number;
  zipf: number;
  concurrency: number;
  warmupMs: number;
  durationMs: number;
}

export interface OtelWorkerResult {
  tier: OtelTier;
  calls: number;
  ms: number;
  /** CPU time of this process per call, in us (user + system). */
  cpuUs: number;
}

export interface OtelWorkerReply {
  results: OtelWorkerResult[];
  /** sdk: the one Prometheus collection at the end. */
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

async function measure(
  hot: HotSet,
  keys: string[],
  next: () => number,
  concurrency: number,
  ms: number,
): Promise<{ calls: number; ms: number; cpuUs: number }> {
  let calls = 0;
  const cpu = process.cpuUsage();
  const start = performance.now();
  const end = start + ms;
  const worker = async () => {
    while (performance.now() < end) {
      await hot.get(keys[next()]);
      calls++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { calls, ms: elapsed, cpuUs: (used.user + used.system) / calls };
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.env.OTEL_BENCH!) as OtelWorkerConfig;
  let prometheus: PrometheusExporter | undefined;
  let meterProvider: MeterProvider | undefined;
  let tracerProvider: BasicTracerProvider | undefined;
  if (cfg.variant.startsWith('sdk')) {
    // What NodeSDK also registers; on Node 20 it turns on promise hooks for the whole process.
    if (cfg.variant === 'sdk-als') {
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    }
    prometheus = new PrometheusExporter({ preventServerStart: true });
    meterProvider = new MeterProvider({ readers: [prometheus] });
    metrics.setGlobalMeterProvider(meterProvider);
    if (cfg.variant !== 'sdk-metrics') {
      tracerProvider = new BasicTracerProvider({
        spanProcessors: [new BatchSpanProcessor(new DroppingExporter())],
        // sdk-sampled: one trace in ten, as production setups sample; the others: every span.
        sampler:
          cfg.variant === 'sdk-sampled'
            ? new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(0.1) })
            : new AlwaysOnSampler(),
      });
      trace.setGlobalTracerProvider(tracerProvider);
    }
  }
  const keys = Array.from({ length: cfg.keys }, (_, i) => `k${i}`);
  const results: OtelWorkerResult[] = [];
  for (const tier of cfg.tiers) {
    const options: StampedeModuleOptions = {
      redis: cfg.redisUrl,
      keyPrefix: `${cfg.prefix}${tier}:`,
      l1: tier === 'l1',
      telemetry: cfg.variant === 'none' ? { metrics: false, tracing: false } : undefined,
    };
    @Module({ imports: [StampedeModule.forRoot(options)], providers: [HotSet] })
    class HotSetModule {}
    const app = await NestFactory.createApplicationContext(HotSetModule, { logger: false });
    const hot = app.get(HotSet);
    for (let i = 0; i < keys.length; i += 200) {
      await Promise.all(keys.slice(i, i + 200).map((k) => hot.get(k))); // every key cached
    }
    const next = zipfSampler(cfg.keys, cfg.zipf);
    await measure(hot, keys, next, cfg.concurrency, cfg.warmupMs);
    const r = await measure(hot, keys, next, cfg.concurrency, cfg.durationMs);
    results.push({ tier, ...r });
    await app.close();
  }
  const reply: OtelWorkerReply = { results };
  if (prometheus) {
    const started = performance.now();
    const { resourceMetrics } = await prometheus.collect();
    const text = new PrometheusSerializer().serialize(resourceMetrics);
    const collectMs = performance.now() - started;
    if (!text.includes('stampede_calls_total{')) throw new Error('no stampede_calls_total');
    const series = text.split('\n').filter((l) => l.startsWith('stampede_')).length;
    reply.prometheus = { bytes: text.length, series, collectMs };
    await tracerProvider?.shutdown();
    await meterProvider!.shutdown();
  }
  process.send!(reply, () => process.disconnect());
}

main().catch((err: unknown) => {
  process.exitCode = 1;
  const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
  if (process.send) process.send({ error }, () => process.disconnect());
  else process.stderr.write(`${error}\n`);
});
