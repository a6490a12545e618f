import { StampedeConfigError } from './errors';

/** A duration in milliseconds, or a string such as '250ms', '30s', '5m', '1h', '1d'. */
export type Duration = number | string;

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/;

/**
 * The milliseconds of a duration string ('1500', '250ms', '1.5s', '5m', '1h', '1d'; a bare
 * number is milliseconds), or undefined when `text` is not one. Not rounded: '0.5ms' is 0.5.
 */
export function parseDuration(text: string): number | undefined {
  const match = PATTERN.exec(text);
  return match ? Number(match[1]) * UNITS[match[2] ?? 'ms'] : undefined;
}

/** Parses a duration to whole milliseconds; `what` names the option in the error message. */
export function toMs(value: Duration, what: string): number {
  let ms: number;
  if (typeof value === 'number') {
    ms = value;
  } else if (typeof value === 'string') {
    const parsed = parseDuration(value);
    if (parsed === undefined) {
      throw new StampedeConfigError(
        `${what}: "${value}" is not a duration; use milliseconds (1500) or a string like '250ms', '30s', '5m', '1h'`,
      );
    }
    ms = parsed;
  } else {
    throw new StampedeConfigError(
      `${what}: expected a number of milliseconds or a string like '30s', got ${typeof value}`,
    );
  }
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new StampedeConfigError(`${what} must be a positive duration, got ${String(value)}`);
  }
  return Math.round(ms);
}
