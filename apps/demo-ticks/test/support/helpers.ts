import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { DeadLetter, DeadLetters } from '@nest-redis-resilience/stream-batch-ack';
import { RandomWalk } from '../../src/collector/random-walk';
import { parseTicksEnv, TicksSettings } from '../../src/config/ticks-env.schema';
import { deadLetterStreamOf } from '../../src/redis/redis-keys';

import { REDIS_URL } from '../../../../test/support/redis';

export { REDIS_URL };
export { deleteKeys } from '../../../../test/support/redis';
export { freePort } from '../../../../support/throwaway-redis';
export { sleep, waitFor } from '../../../../test/support/wait';

export const FIXTURE = join(__dirname, '..', 'fixtures', 'ticks.jsonl');
export const REGISTER_TS = join(__dirname, '..', '..', '..', '..', 'scripts', 'register-ts.js');
export const MAIN_TS = join(__dirname, '..', '..', 'src', 'main.ts');

export interface FixtureTick {
  symbol: string;
  price: number;
  qty: number;
  ts: number;
}

/** A key prefix of this test file alone; cleanup deletes only keys under it. */
export function randomPrefix(name: string): string {
  return `test:demo-ticks:${name}:${randomBytes(4).toString('hex')}:`;
}

/** Environment of a test app: its own stream, group and keys under `prefix`, HTTP on a free port. */
export function testEnv(
  prefix: string,
  overrides: Record<string, string> = {},
): Record<string, string> {
  return {
    REDIS_URL,
    HOST: '127.0.0.1',
    PORT: '0',
    TICKS_STREAM: `${prefix}ticks`,
    TICKS_KEY_PREFIX: prefix,
    TICKS_GROUP: 'candles',
    COLLECTOR: 'false',
    LOG_LEVEL: 'silent',
    READ_BLOCK_MS: '20',
    // The fixture's ticks are from 2024: accept ticks up to 20 years old.
    TICK_MAX_AGE_MS: String(20 * 365 * 86_400_000),
    ...overrides,
  };
}

export function testConfig(prefix: string, overrides: Record<string, string> = {}): TicksSettings {
  return parseTicksEnv(testEnv(prefix, overrides));
}

export function readFixture(file = FIXTURE): FixtureTick[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as FixtureTick);
}

export interface ExpectedCandle {
  start: number;
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number;
  trades: number;
}

const LENGTHS: Record<string, number> = { '1m': 60_000, '5m': 300_000, '30m': 1_800_000 };

/**
 * Candles computed here, independently of the app: group by symbol and floor(ts / length);
 * open and close are the first and last tick by (ts, position in the input), since the input
 * is published in order.
 */
export function expectedCandles(
  ticks: FixtureTick[],
  symbol: string,
  interval: string,
): ExpectedCandle[] {
  const length = LENGTHS[interval];
  const groups = new Map<number, { t: FixtureTick; i: number }[]>();
  ticks.forEach((t, i) => {
    if (t.symbol !== symbol) return;
    const start = Math.floor(t.ts / length) * length;
    if (!groups.has(start)) groups.set(start, []);
    groups.get(start)!.push({ t, i });
  });
  return [...groups.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([start, group]) => {
      const sorted = [...group].sort((a, b) => a.t.ts - b.t.ts || a.i - b.i);
      return {
        start,
        open: sorted[0].t.price,
        high: Math.max(...group.map((g) => g.t.price)),
        low: Math.min(...group.map((g) => g.t.price)),
        close: sorted[sorted.length - 1].t.price,
        volume: group.reduce((s, g) => s + g.t.qty, 0),
        trades: group.length,
      };
    });
}

/** The candles of the app's HTTP API without the fields the expectation does not have. */
export async function fetchCandles(
  url: string,
  symbol: string,
  interval: string,
): Promise<ExpectedCandle[]> {
  const res = await fetch(`${url}/symbols/${symbol}/candles?interval=${interval}&limit=1000`);
  if (res.status !== 200)
    throw new Error(`GET candles ${symbol} ${interval}: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as {
    candles: (ExpectedCandle & { end: number; closed: boolean })[];
  };
  return body.candles.map(({ start, open, high, low, close, volume, trades }) => ({
    start,
    open,
    high,
    low,
    close,
    volume,
    trades,
  }));
}

/** XADDs each tick in the client's format (`data` = JSON), in order; returns the entry ids. */
export async function publish(redis: Redis, stream: string, ticks: unknown[]): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < ticks.length; i += 500) {
    const pipeline = redis.pipeline();
    for (const t of ticks.slice(i, i + 500)) pipeline.xadd(stream, '*', 'data', JSON.stringify(t));
    const replies = (await pipeline.exec()) ?? [];
    for (const [err, id] of replies) {
      if (err) throw err;
      ids.push(id as string);
    }
  }
  return ids;
}

export async function pendingCount(redis: Redis, stream: string, group: string): Promise<number> {
  const summary = (await redis.call('XPENDING', stream, group)) as [number, ...unknown[]];
  return Number(summary[0]);
}

/** True once the group has read every entry of the stream (lag 0) and acknowledged them all. */
export async function groupDrained(redis: Redis, stream: string, group: string): Promise<boolean> {
  const groups = (await redis.call('XINFO', 'GROUPS', stream)) as unknown[][];
  const info = groups.find((g) => g[g.indexOf('name') + 1] === group);
  if (!info) return false;
  return (
    Number(info[info.indexOf('lag') + 1]) === 0 && Number(info[info.indexOf('pending') + 1]) === 0
  );
}

/** The value of a counter in a Prometheus text page. */
export function metricValue(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

/**
 * The sum of the series of `name` in a Prometheus text page whose labels include `labels` (other
 * labels allowed): for the libraries' metrics, whose series carry several attributes.
 */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map(
      [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[3]);
  }
  return sum;
}

/** Entry ids whose tick was applied: their idempotency record (group "candles") is "done". */
export async function appliedIds(
  redis: Redis,
  prefix: string,
  stream: string,
): Promise<Set<string>> {
  const head = `${prefix}idem:candles:${stream}:`;
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${head}*`, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  const values = keys.length > 0 ? await redis.mget(...keys) : [];
  return new Set(keys.filter((_, i) => values[i] === 'done').map((k) => k.slice(head.length)));
}

/**
 * `count` synthetic ticks of `symbols` symbols (SYM001...), seeded, with whole quantities (exact
 * volume sums), their `ts` spread evenly over the `spanMs` before `end` (default: now - 1 s).
 */
export function recentTicks(
  count: number,
  options: { symbols?: number; seed?: number; spanMs?: number; end?: number } = {},
): FixtureTick[] {
  const { symbols = 3, seed = 7, spanMs = 30 * 60_000, end = Date.now() - 1000 } = options;
  const walk = new RandomWalk(symbols, seed);
  const start = end - spanMs;
  return Array.from({ length: count }, (_, i) =>
    walk.next(i % symbols, start + Math.floor((i * spanMs) / count)),
  );
}

/**
 * The dead letters of the app's stream, oldest first, read and parsed by the library's
 * DeadLetters (on the app's dead-letter stream names).
 */
export function readDeadLetters(redis: Redis, config: TicksSettings): Promise<DeadLetter[]> {
  const { consumer } = config;
  const deadLetters = new DeadLetters(redis, {
    deadLetterStream: (stream) => deadLetterStreamOf(consumer, stream),
  });
  return deadLetters.list(consumer.stream, { count: 10_000 });
}

/** The tick with the greatest (ts, position): what GET /symbols/:s/price must answer. */
export function expectedLatest(ticks: FixtureTick[], symbol: string): FixtureTick {
  let best: FixtureTick | undefined;
  for (const t of ticks) if (t.symbol === symbol && (!best || t.ts >= best.ts)) best = t;
  if (!best) throw new Error(`no tick of ${symbol}`);
  return best;
}
