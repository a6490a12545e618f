/*
 * Messages between the benchmark's parent (main.ts) and its forked producer and consumer
 * processes, and the shape of one tick.
 */

/**
 * The consumer:
 *   per-message    transport, per-message handler, one XACK per message (ack.batchSize 1)
 *   batch          transport, per-message handler, batched XACKs
 *   batch-idem-redis  batch + transport idempotency, store 'redis' (L1 LRU + Redis L2)
 *   batch-handler  transport, batch handler (`@EventPattern(stream, { batch: true })`), batched XACKs
 *   idem-memory    batch-handler + transport idempotency, store 'memory' (L1 LRU)
 *   idem-redis     batch-handler + transport idempotency, store 'redis' (L1 LRU + Redis L2)
 *   raw            a plain ioredis XREADGROUP loop (the ceiling)
 *   raw-idem       the raw loop + the library's IdempotencyStore (L1 + L2) around each batch: a
 *                  diagnostic of what the idempotency round trips cost without the transport
 */
export type Variant =
  | 'per-message'
  | 'batch'
  | 'batch-idem-redis'
  | 'batch-handler'
  | 'idem-memory'
  | 'idem-redis'
  | 'raw'
  | 'raw-idem';
/**
 * fixed: a steady rate for a duration, producer and consumer together;
 * max:   a number of messages written as fast as possible while the consumer reads;
 * drain: the same number of messages written first (a backlog), then the consumer starts.
 */
export type Mode = 'fixed' | 'max' | 'drain';

/** `--otel`: none (API not resolvable), api (API, no SDK), sdk (metrics + traces SDK); see otel-setup.ts. */
export type OtelMode = 'none' | 'api' | 'sdk' | 'sdk-metrics';
export const OTEL_MODES: readonly OtelMode[] = ['none', 'api', 'sdk', 'sdk-metrics'];

export const VARIANTS: readonly Variant[] = [
  'per-message',
  'batch',
  'batch-idem-redis',
  'batch-handler',
  'idem-memory',
  'idem-redis',
  'raw',
  'raw-idem',
];
export const MODES: readonly Mode[] = ['fixed', 'max', 'drain'];

/** The idempotent variants, each with the variant whose CPU it is compared with ("CPU vs plain"). */
export const PLAIN_OF: Partial<Record<Variant, Variant>> = {
  'batch-idem-redis': 'batch',
  'idem-memory': 'batch-handler',
  'idem-redis': 'batch-handler',
  'raw-idem': 'raw',
};

/** One message: `sentAt` is `performance.timeOrigin + performance.now()` in the producer (ms, sub-ms resolution). */
export interface Tick {
  seq: number;
  symbol: string;
  price: number;
  qty: number;
  sentAt: number;
}

export interface ConsumerConfig {
  variant: Variant;
  redisUrl: string;
  stream: string;
  group: string;
  /** Warm-up messages sent first (seq 0 .. warmup-1): handled and acked, not measured. */
  warmup: number;
  /** Measured messages (seq warmup ..): the consumer reports `done` once it handled all of them. */
  expected: number;
  batchSize: number;
  intervalMs: number;
  readCount: number;
  concurrency: number;
  rssEveryMs: number;
  /** Prefix of the L2 idempotency records (idem-redis), deleted by the parent after the run. */
  idempotencyPrefix: string;
  /** Write a CPU profile of the measured window (first to last measured message) to this file. */
  cpuProfile?: string;
  /** The OpenTelemetry setup of the consumer (otel-setup.ts); undefined: as installed, no SDK. */
  otel?: OtelMode;
}

export interface ProducerConfig {
  redisUrl: string;
  stream: string;
  mode: Mode;
  /** fixed mode: messages per second. */
  rate: number;
  /** Messages to send in total (warm-up included). */
  total: number;
  /** max mode: XADDs per pipeline, and pipelines in flight at once. */
  pipelineSize: number;
  pipelinesInFlight: number;
}

export interface ConsumerResult {
  handled: number;
  duplicates: number;
  /** Sequence numbers never handled (only counted up to `expected`). */
  missing: number;
  /** e2e latency (ms) quantiles over every handled message. */
  p50: number;
  p99: number;
  max: number;
  /** High-resolution time of the first and the last handled message. */
  firstAt: number;
  lastAt: number;
  peakRssMb: number;
  /** User + system CPU time of the consumer process while messages flowed, ms. */
  cpuMs: number;
  /** Event-loop delay of the consumer while messages flowed (ms): how late its timers and I/O callbacks ran. */
  loopDelayP99: number;
  loopDelayMax: number;
  /** `server.metrics()` of the transport at the end (not for raw). */
  server?: {
    delivered: number;
    succeeded: number;
    failed: number;
    batches: number;
    duplicatesSkipped: { memory: number; redis: number };
    inProgressSkipped: number;
  };
}

export interface ProducerResult {
  sent: number;
  firstAt: number;
  lastAt: number;
}

export type ChildMessage =
  | { type: 'ready' }
  | { type: 'done' }
  | { type: 'consumer-result'; result: ConsumerResult }
  | { type: 'producer-result'; result: ProducerResult }
  | { type: 'error'; error: string };

export type ParentMessage = { type: 'start' } | { type: 'stop' };

/** Wall-clock time in ms with sub-millisecond resolution, comparable across processes of one machine. */
export function hrNow(): number {
  return performance.timeOrigin + performance.now();
}
