/* Messages between main.ts and its forked producer and consumer processes; the shape of a tick. */

/** The consumer variants (--help describes them; consumer.ts runs them). */
export const VARIANTS = [
  'per-message',
  'batch',
  'batch-idem-redis',
  'batch-handler',
  'idem-memory',
  'idem-redis',
  'raw',
  'raw-idem',
] as const;
export type Variant = (typeof VARIANTS)[number];
export const MODES = ['fixed', 'max', 'drain'] as const;
export type Mode = (typeof MODES)[number];
/** `--otel`: the consumer's OpenTelemetry setup (otel-setup.ts). */
export const OTEL_MODES = ['none', 'api', 'sdk', 'sdk-metrics'] as const;
export type OtelMode = (typeof OTEL_MODES)[number];

/** The idempotent variants, each with the variant whose CPU it is compared with ("CPU vs plain"). */
export const PLAIN_OF: Partial<Record<Variant, Variant>> = {
  'batch-idem-redis': 'batch',
  'idem-memory': 'batch-handler',
  'idem-redis': 'batch-handler',
  'raw-idem': 'raw',
};

/** `sentAt`: hrNow() in the producer. */
export type Tick = { seq: number; symbol: string; price: number; qty: number; sentAt: number };

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
  /** Prefix of the L2 idempotency records, deleted by the parent after the run. */
  idempotencyPrefix: string;
  /** Write a CPU profile of the measured window (first to last measured message) to this file. */
  cpuProfile?: string;
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
  firstAt: number;
  lastAt: number;
  peakRssMb: number;
  /** User + system CPU time of the consumer process while messages flowed, ms. */
  cpuMs: number;
  loopDelayP99: number;
  loopDelayMax: number;
  /** `server.metrics()` of the transport at the end (not for raw). */
  server?: {
    delivered: number;
    batches: number;
    failed: number;
    duplicatesSkipped: { memory: number; redis: number };
    inProgressSkipped: number;
  };
}

export type ProducerResult = { sent: number; firstAt: number; lastAt: number };

export type ChildMessage =
  | { type: 'ready' }
  | { type: 'done' }
  | { type: 'consumer-result'; result: ConsumerResult }
  | { type: 'producer-result'; result: ProducerResult }
  | { type: 'error'; error: string };

export type ParentMessage = { type: 'start' } | { type: 'stop' };

/** Wall-clock time in ms with sub-millisecond resolution, comparable across processes of one machine. */
export const hrNow = (): number => performance.timeOrigin + performance.now();
