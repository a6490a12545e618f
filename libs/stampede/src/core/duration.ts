import { parseDuration } from '@nest-redis-resilience/common';
import { StampedeConfigError } from './errors';

export { parseDuration };

/** A duration in milliseconds, or a string such as '250ms', '30s', '5m', '1h', '1d'. */
export type Duration = number | string;

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
