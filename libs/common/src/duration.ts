const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/;

/**
 * The milliseconds of a duration string ('1500', '250ms', '1.5s', '5m', '1h', '1d'; a bare
 * number is milliseconds), or undefined when `text` is not one. Not rounded: '0.5ms' is 0.5.
 * What a caller allows (zero, whole milliseconds) and how it reports bad input is its own.
 */
export function parseDuration(text: string): number | undefined {
  const match = PATTERN.exec(text);
  return match ? Number(match[1]) * UNITS[match[2] ?? 'ms'] : undefined;
}
