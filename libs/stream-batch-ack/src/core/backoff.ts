export interface BackoffOptions {
  /** Delay before the first retry, in ms. Default 50. */
  initialMs?: number;
  /** Upper bound of a delay, in ms. Default 2000. */
  maxMs?: number;
  /** Growth factor per attempt. Default 2. */
  factor?: number;
  /** Random spread as a ratio of the delay (0.2 = +-20 %). Default 0.2. */
  jitter?: number;
}

/** Exponential backoff with jitter. `attempt` starts at 1. */
export function backoffDelay(
  attempt: number,
  options: BackoffOptions = {},
  random: () => number = Math.random,
): number {
  const initialMs = options.initialMs ?? 50;
  const maxMs = options.maxMs ?? 2000;
  const factor = options.factor ?? 2;
  const jitter = options.jitter ?? 0.2;
  const base = Math.min(maxMs, initialMs * Math.pow(factor, Math.max(0, attempt - 1)));
  const spread = base * jitter * (random() * 2 - 1);
  return Math.max(0, Math.min(maxMs, Math.round(base + spread)));
}
