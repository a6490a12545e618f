/* The options of the demo-ticks benchmark (`npm run bench:ticks -- --demo`; --help lists them). */
import { cliOptions, flag, num, str, UsageError, Values } from '../shared/args';

const SPEC = {
  duration: num(60, 'seconds the collector publishes'),
  symbols: num(100, 'symbols'),
  rate: num(100, 'ticks per second per symbol'),
  'drain-timeout': num(120, 'seconds to wait for the consumer to catch up afterwards'),
  'semi-space': num(undefined, "V8 --max-semi-space-size of the consumer, MB (default: V8's)"),
  'old-space': num(undefined, "V8 --max-old-space-size of the consumer, MB (default: V8's)"),
  from: str(
    'dist',
    "dist: the `npm run build` output (built first); src: the TypeScript sources through scripts/register-ts.js (whose compiler adds 80-150 MB to the consumer's RSS)",
  ),
  'no-build': flag('with --from dist: use the existing build'),
  'cpu-prof': str(
    undefined,
    'write a V8 CPU profile of the consumer over the publishing period',
    '<file>',
  ),
  json: str(undefined, 'also write the results as JSON', '<file>'),
  keep: flag('keep the Redis keys (default: delete them)'),
  demo: flag('accepted when run through bench:ticks -- --demo'),
};

export type DemoTicksBenchOptions = Values<typeof SPEC> & { redisUrl: string };

const DESCRIPTION = `The real demo-ticks app at 10,000 ticks/s: the consumer (apps/demo-ticks/src/main.ts) and the
collector (src/collector.main.ts) run as two processes of their own; this process samples the
consumer's RSS and /metrics each second.`;

export function parseDemoTicksArgs(argv: string[]): DemoTicksBenchOptions {
  const v = cliOptions('npm run bench:ticks -- --demo', DESCRIPTION, SPEC, argv, (x) => {
    if (x.from !== 'dist' && x.from !== 'src') throw new UsageError('--from is dist or src');
  });
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  return { ...v, redisUrl };
}
