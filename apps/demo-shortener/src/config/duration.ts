import { parseDuration as parseMs } from '@nest-redis-resilience/stampede';

/**
 * `1500`, `1500ms`, `1.5s`, `10m`, `1h`, `1d` -> whole milliseconds (the library's parser, the one
 * that reads `ttl: '10m'`); undefined when `raw` is not a duration.
 */
export function parseDuration(raw: string): number | undefined {
  const ms = parseMs(raw.trim());
  return ms === undefined ? undefined : Math.round(ms);
}
