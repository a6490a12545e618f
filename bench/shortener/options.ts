/* The options of `npm run bench:shortener` (--help lists them). */
import { flag, list, num, str, Values } from '../shared/args';

/** The parts of the benchmark; `--only` picks some. */
export const SECTIONS = ['redirects', 'lifetime', 'creation', 'hit-path'] as const;
export type Section = (typeof SECTIONS)[number];

const count = (dflt: number, help: string) => num(dflt, help, { min: 0 });

export const SPEC = {
  'database-url': str('postgres://postgres@127.0.0.1:5432/test', 'PostgreSQL', '<url>'),
  connections: list(
    undefined,
    ['20', '50', '100'],
    'redirects: autocannon connections per row, positive integers',
  ),
  strategies: list(
    ['sequence', 'hash', 'snowflake'],
    ['sequence', 'hash', 'snowflake'],
    'creation: code strategies',
  ),
  only: list(SECTIONS, SECTIONS, 'the sections to run'),
  // The help of these is the name of the option they set.
  pool: count(10, 'pool'),
  duration: count(10, 'durationS'),
  warmup: count(2, 'warmupS'),
  'hot-codes': count(10, 'hotCodes'),
  'stress-connections': count(500, 'stressConnections'),
  'stress-duration': count(10, 'stressDurationS'),
  'lifetime-ttl': count(2, 'lifetimeTtlS'),
  'lifetime-duration': count(10, 'lifetimeDurationS'),
  'create-connections': count(50, 'createConnections'),
  'create-duration': count(10, 'createDurationS'),
  'hit-connections': count(100, 'hitConnections'),
  'hit-duration': count(2, 'hitDurationS'),
  'hit-rounds': count(20, 'hitRounds'),
  'cpu-prof': str(
    undefined,
    'write a V8 CPU profile of each hit-path server (one more run each) there',
    '<dir>',
  ),
  perf: str(
    undefined,
    'the same with Linux perf (on-CPU samples only; needs perf and root or kernel.perf_event_paranoid <= 1): the breakdown the docs quote',
    '<dir>',
  ),
  built: flag(
    'start dist/apps/demo-shortener/main.js (after `npm run build`) instead of src/main.ts via register-ts',
  ),
  json: str(undefined, 'also write every number as JSON', '<file>'),
};

export type ShortenerBenchOptions = Values<typeof SPEC> & {
  redisUrl: string;
  log: (line: string) => void;
};
