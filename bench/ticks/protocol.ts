/*
 * Messages between the benchmark's parent (main.ts) and its forked producer and consumer
 * processes, and the shape of one tick.
 */

/** How the consumer acknowledges. */
export type Variant = 'per-message' | 'batch' | 'raw';
/** fixed: a steady rate for a duration; max: a fixed number of messages, as fast as possible. */
export type Mode = 'fixed' | 'max';

export const VARIANTS: readonly Variant[] = ['per-message', 'batch', 'raw'];
export const MODES: readonly Mode[] = ['fixed', 'max'];

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
