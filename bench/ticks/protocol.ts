/* Messages between main.ts and its forked producer and consumer processes; the shape of a tick. */
import type { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import type { Recorder } from './recorder';

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

/**
 * `warmup`: messages sent first (seq 0 .. warmup-1), handled and acked, not measured; `expected`:
 * measured messages (seq warmup ..), `done` once all were handled; `cpuProfile`: a file for the
 * CPU profile of the measured window.
 */
export type ConsumerConfig = Record<'redisUrl' | 'stream' | 'group' | 'idempotencyPrefix', string> &
  Record<
    'warmup' | 'expected' | 'batchSize' | 'intervalMs' | 'readCount' | 'concurrency' | 'rssEveryMs',
    number
  > & {
    variant: Variant;
    cpuProfile?: string;
    otel?: OtelMode;
  };

/** `rate`: fixed mode, messages per second; `total`: messages to send, warm-up included. */
export type ProducerConfig = Record<'redisUrl' | 'stream', string> &
  Record<'rate' | 'total' | 'pipelineSize' | 'pipelinesInFlight', number> & { mode: Mode };

/** The consumer's measures (recorder.ts), and its transport's metrics() (not in the raw loops). */
export type ConsumerResult = ReturnType<Recorder['result']> & {
  server?: Pick<
    ReturnType<ServerRedisStreams['metrics']>,
    'delivered' | 'batches' | 'failed' | 'duplicatesSkipped' | 'inProgressSkipped'
  >;
};

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
