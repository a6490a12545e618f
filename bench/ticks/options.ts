/*
 * The options of `npm run bench:ticks` (see --help), their defaults, and which variants each mode
 * runs.
 */
import { resolve } from 'node:path';
import { cliOptions } from '../shared/args';
import { Mode, MODES, OTEL_MODES, OtelMode, Variant, VARIANTS } from './protocol';

export interface TicksBenchOptions {
  modes: Mode[];
  /** The variants of every mode; undefined: each mode's DEFAULT_VARIANTS. */
  variants?: Variant[];
  repeat: number;
  rate: number;
  durationS: number;
  messages: number;
  warmupS: number;
  batchSize: number;
  intervalMs: number;
  readCount: number;
  concurrency: number;
  pipelineSize: number;
  /** Before each row, wait up to this many seconds for other processes to leave the CPU (0: don't). */
  quietS: number;
  redisUrl?: string;
  cpuProfDir?: string;
  json?: string;
  /** One row per library variant and OpenTelemetry setup of the consumer; undefined: as installed. */
  otel?: OtelMode[];
}

/** The rows the targets need (see TARGETS), per mode. */
export const DEFAULT_VARIANTS: Record<Mode, readonly Variant[]> = {
  drain: ['batch', 'batch-idem-redis', 'batch-handler', 'idem-memory', 'idem-redis', 'raw'],
  max: ['batch', 'batch-idem-redis', 'batch-handler', 'idem-memory', 'idem-redis', 'raw'],
  fixed: ['batch-handler', 'idem-redis', 'raw'],
};

export const DEFAULTS: TicksBenchOptions = {
  modes: ['drain', 'fixed'],
  repeat: 1,
  rate: 10_000,
  durationS: 30,
  messages: 200_000,
  warmupS: 2,
  batchSize: 500,
  intervalMs: 50,
  readCount: 500,
  concurrency: 1000,
  pipelineSize: 1000,
  quietS: 0,
};

export function variantsOf(o: TicksBenchOptions, mode: Mode): readonly Variant[] {
  return o.variants ?? DEFAULT_VARIANTS[mode];
}

const HELP = `Producer and consumer run as forked processes on a real Redis. For each mode and variant:
  modes     fixed: --rate msgs/s for --duration s, producer and consumer together
            drain: --messages (after the warm-up's) written first, then the consumer drains the backlog
            max:   --messages written as fast as possible while the consumer reads
  variants  per-message:   ServerRedisStreams, per-message handler, ack.batchSize 1, ack.intervalMs 0
            batch:         ServerRedisStreams, per-message handler, ack.batchSize --batch-size, ack.intervalMs --interval
            batch-idem-redis: batch + idempotency { store: 'redis' } (L1 LRU + Redis L2)
            batch-handler: ServerRedisStreams, batch handler (@EventPattern(stream, { batch: true })), batched acks
            idem-memory:   batch-handler + idempotency { store: 'memory' } (L1 LRU)
            idem-redis:    batch-handler + idempotency { store: 'redis' } (L1 LRU + Redis L2)
            raw:           a plain ioredis loop, XREADGROUP COUNT --read-count + one XACK per batch (the ceiling)
            raw-idem:      raw + the library's IdempotencyStore (L1 + L2) per batch (a diagnostic, not by default)
Every consumer does the same work per message: parse it and record its latency and sequence number.
By default the benchmark starts its OWN redis-server on a free port (and ignores REDIS_URL), so
that the command counts come from this benchmark only.
Instead of the consumer rows:
  --demo [options]       the demo-ticks app at 10,000 ticks/s (--demo --help lists its options)
  --rebalance [options]  ordered partitions while consumers die, leave and join (--rebalance --help)`;

const SPEC = {
  modes: { type: 'list', choices: MODES, default: DEFAULTS.modes, help: 'the modes to run' },
  variants: {
    type: 'list',
    choices: VARIANTS,
    help: `the same variants for every mode; default per mode: drain and max: ${DEFAULT_VARIANTS.drain.join(',')}; fixed: ${DEFAULT_VARIANTS.fixed.join(',')}`,
  },
  repeat: {
    type: 'number',
    default: DEFAULTS.repeat,
    help: 'runs of each row (the tables then add the median of each variant, the targets use medians)',
  },
  rate: {
    type: 'number',
    default: DEFAULTS.rate,
    help: 'fixed mode: messages per second (and the warm-up rate)',
  },
  duration: { type: 'number', default: DEFAULTS.durationS, help: 'fixed mode: seconds' },
  messages: {
    type: 'number',
    default: DEFAULTS.messages,
    help: 'drain and max modes: measured messages',
  },
  warmup: {
    type: 'number',
    min: 0,
    default: DEFAULTS.warmupS,
    help: 'seconds at --rate of warm-up messages, handled but not measured',
  },
  'batch-size': {
    type: 'number',
    default: DEFAULTS.batchSize,
    help: 'ack.batchSize of the batch variants',
  },
  interval: {
    type: 'number',
    default: DEFAULTS.intervalMs,
    help: 'ack.intervalMs of the batch variants',
  },
  'read-count': { type: 'number', default: DEFAULTS.readCount, help: 'XREADGROUP COUNT' },
  concurrency: {
    type: 'number',
    default: DEFAULTS.concurrency,
    help: 'handler concurrency of the transport',
  },
  pipeline: {
    type: 'number',
    default: DEFAULTS.pipelineSize,
    help: 'max and drain modes: XADDs per pipeline, 4 in flight',
  },
  quiet: {
    type: 'number',
    min: 0,
    default: DEFAULTS.quietS,
    help: 'before each row, wait up to this many seconds until processes outside the benchmark use < 10 % of a core (every row reports their CPU: "others\' CPU")',
  },
  'redis-url': {
    type: 'string',
    placeholder: '<url>',
    help: "use this Redis instead of starting a throwaway redis-server (INFO commandstats is server-wide: other clients' commands then count too)",
  },
  'cpu-prof': {
    type: 'string',
    placeholder: '<dir>',
    help: "write a CPU profile of each consumer's measured window to <dir> (<mode>-<variant>-<run>.cpuprofile) and print where the CPU went",
  },
  json: { type: 'string', placeholder: '<file>', help: 'also write every number as JSON' },
  otel: {
    type: 'list',
    choices: OTEL_MODES,
    help: 'run each library row once per OpenTelemetry setup of the consumer (bench/ticks/otel-setup.ts): none = @opentelemetry/api not resolvable, api = the API without an SDK, sdk-metrics = MeterProvider + Prometheus exporter, sdk = that (collected once at the end) + tracer provider with a batch span processor to a no-op exporter; adds a table of msgs/s and CPU vs none. Default: as installed (the API, no SDK), no extra table',
  },
} as const;

export function parseTicksArgs(argv: string[]): TicksBenchOptions {
  const v = cliOptions('npm run bench:ticks', HELP, SPEC, argv);
  return {
    modes: v.modes as Mode[],
    variants: v.variants as Variant[] | undefined,
    repeat: v.repeat,
    rate: v.rate,
    durationS: v.duration,
    messages: v.messages,
    warmupS: v.warmup,
    batchSize: v['batch-size'],
    intervalMs: v.interval,
    readCount: v['read-count'],
    concurrency: v.concurrency,
    pipelineSize: v.pipeline,
    quietS: v.quiet,
    redisUrl: v['redis-url'],
    cpuProfDir: v['cpu-prof'] === undefined ? undefined : resolve(v['cpu-prof']),
    json: v.json,
    otel: v.otel as OtelMode[] | undefined,
  };
}
