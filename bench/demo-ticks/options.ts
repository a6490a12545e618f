/*
 * The options of the demo-ticks benchmark (`npm run bench:ticks -- --demo`; --help lists them)
 * and their defaults.
 */
import { cliOptions } from '../shared/args';

export interface DemoTicksBenchOptions {
  redisUrl: string;
  durationMs: number;
  symbols: number;
  ratePerSymbol: number;
  drainTimeoutMs: number;
  /** V8 --max-semi-space-size (MB) of the consumer process; 0 = V8's default. */
  semiSpaceMb: number;
  /** V8 --max-old-space-size (MB) of the consumer process; 0 = V8's default. */
  oldSpaceMb: number;
  /** Run the built app (dist) or the TypeScript sources through register-ts (src). */
  from: 'dist' | 'src';
  /** With from = 'dist': build it first. */
  build: boolean;
  /** Write a CPU profile of the consumer (publishing period) to this file. */
  cpuProfile?: string;
  sampleMs: number;
  keep: boolean;
  /** Print the report (default true). */
  print: boolean;
}

export const DEFAULT_OPTIONS: DemoTicksBenchOptions = {
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  durationMs: 60_000,
  symbols: 100,
  ratePerSymbol: 100,
  drainTimeoutMs: 120_000,
  semiSpaceMb: 0,
  oldSpaceMb: 0,
  from: 'dist',
  build: true,
  sampleMs: 1000,
  keep: false,
  print: true,
};

const SPEC = {
  duration: { type: 'number', default: 60, help: 'seconds the collector publishes' },
  symbols: { type: 'number', default: 100, help: 'symbols' },
  rate: { type: 'number', default: 100, help: 'ticks per second per symbol' },
  'drain-timeout': {
    type: 'number',
    default: 120,
    help: 'seconds to wait for the consumer to catch up afterwards',
  },
  'semi-space': {
    type: 'number',
    help: "V8 --max-semi-space-size of the consumer, MB (default: V8's)",
  },
  'old-space': {
    type: 'number',
    help: "V8 --max-old-space-size of the consumer, MB (default: V8's)",
  },
  from: {
    type: 'string',
    default: 'dist',
    help: "dist: the `npm run build` output (built first); src: the TypeScript sources through scripts/register-ts.js (whose compiler adds 80-150 MB to the consumer's RSS)",
  },
  'no-build': { type: 'boolean', help: 'with --from dist: use the existing build' },
  'cpu-prof': {
    type: 'string',
    placeholder: '<file>',
    help: 'write a V8 CPU profile of the consumer over the publishing period',
  },
  json: { type: 'string', placeholder: '<file>', help: 'also write the results as JSON' },
  keep: { type: 'boolean', help: 'keep the Redis keys (default: delete them)' },
  demo: { type: 'boolean', help: 'accepted when run through bench:ticks -- --demo' },
} as const;

const DESCRIPTION = `The real demo-ticks app at 10,000 ticks/s: the consumer (apps/demo-ticks/src/main.ts) and the
collector (src/collector.main.ts) run as two processes of their own; this process samples the
consumer's RSS and /metrics each second.`;

export function parseDemoTicksArgs(argv: string[]): {
  options: Partial<DemoTicksBenchOptions>;
  json?: string;
} {
  const v = cliOptions('npm run bench:ticks -- --demo', DESCRIPTION, SPEC, argv);
  if (v.from !== 'dist' && v.from !== 'src') {
    process.stderr.write('bench demo-ticks: --from is dist or src\n');
    process.exit(2);
  }
  const options: Partial<DemoTicksBenchOptions> = {
    durationMs: v.duration * 1000,
    symbols: v.symbols,
    ratePerSymbol: v.rate,
    drainTimeoutMs: v['drain-timeout'] * 1000,
    from: v.from,
  };
  if (v['semi-space'] !== undefined) options.semiSpaceMb = v['semi-space'];
  if (v['old-space'] !== undefined) options.oldSpaceMb = v['old-space'];
  if (v['no-build']) options.build = false;
  if (v.keep) options.keep = true;
  if (v['cpu-prof'] !== undefined) options.cpuProfile = v['cpu-prof'];
  return { options, json: v.json };
}
