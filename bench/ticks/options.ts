/* The options of `npm run bench:ticks` (see --help) and which variants each mode runs. */
import { cliOptions, list, num, str, Values } from '../shared/args';
import { Mode, MODES, OTEL_MODES, Variant, VARIANTS } from './protocol';

/** The rows the targets need, per mode. */
export const DEFAULT_VARIANTS: Record<Mode, readonly Variant[]> = {
  drain: ['batch', 'batch-idem-redis', 'batch-handler', 'idem-memory', 'idem-redis', 'raw'],
  max: ['batch', 'batch-idem-redis', 'batch-handler', 'idem-memory', 'idem-redis', 'raw'],
  fixed: ['batch-handler', 'idem-redis', 'raw'],
};

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

export const SPEC = {
  modes: list(MODES, ['drain', 'fixed'], 'the modes to run'),
  variants: list(
    VARIANTS,
    undefined,
    `the same variants for every mode; default per mode: drain and max: ${DEFAULT_VARIANTS.drain.join(',')}; fixed: ${DEFAULT_VARIANTS.fixed.join(',')}`,
  ),
  repeat: num(
    1,
    'runs of each row (the tables then add the median of each variant, the targets use medians)',
  ),
  rate: num(10_000, 'fixed mode: messages per second (and the warm-up rate)'),
  duration: num(30, 'fixed mode: seconds'),
  messages: num(200_000, 'drain and max modes: measured messages'),
  warmup: num(2, 'seconds at --rate of warm-up messages, handled but not measured', { min: 0 }),
  'batch-size': num(500, 'ack.batchSize of the batch variants'),
  interval: num(50, 'ack.intervalMs of the batch variants'),
  'read-count': num(500, 'XREADGROUP COUNT'),
  concurrency: num(1000, 'handler concurrency of the transport'),
  pipeline: num(1000, 'max and drain modes: XADDs per pipeline, 4 in flight'),
  quiet: num(
    0,
    'before each row, wait up to this many seconds until processes outside the benchmark use < 10 % of a core (every row reports their CPU: "others\' CPU")',
    { min: 0 },
  ),
  'redis-url': str(
    undefined,
    "use this Redis instead of starting a throwaway redis-server (INFO commandstats is server-wide: other clients' commands then count too)",
    '<url>',
  ),
  'cpu-prof': str(
    undefined,
    "write a CPU profile of each consumer's measured window to <dir> (<mode>-<variant>-<run>.cpuprofile) and print where the CPU went",
    '<dir>',
  ),
  json: str(undefined, 'also write every number as JSON', '<file>'),
  otel: list(
    OTEL_MODES,
    undefined,
    'run each library row once per OpenTelemetry setup of the consumer (bench/ticks/otel-setup.ts): none = @opentelemetry/api not resolvable, api = the API without an SDK, sdk-metrics = MeterProvider + Prometheus exporter, sdk = that (collected once at the end) + tracer provider with a batch span processor to a no-op exporter; adds a table of msgs/s and CPU vs none. Default: as installed (the API, no SDK), no extra table',
  ),
};

export type TicksBenchOptions = Values<typeof SPEC>;

export const variantsOf = (o: TicksBenchOptions, mode: Mode) =>
  (o.variants as Variant[] | undefined) ?? DEFAULT_VARIANTS[mode];

export const parseTicksArgs = (argv: string[]) =>
  cliOptions('npm run bench:ticks', HELP, SPEC, argv);
