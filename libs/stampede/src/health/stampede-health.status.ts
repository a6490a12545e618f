/**
 * The health decision of StampedeHealthIndicator once the store answered its ping, without
 * terminus: what makes a working cache degraded, and how that is reported by the terminus
 * installed.
 */
import type { StampedeFailSafeState } from '../core/stampede-engine';

export interface StampedeHealthFacts {
  /** How long the store still skips its backend after a timeout (its cool-down), in ms. */
  cooldownMs: number;
  /** Values served stale because their refresh within grace failed, if any. */
  failSafe: StampedeFailSafeState | undefined;
  /** Epoch ms, the clock of `failSafe.since`. */
  now: number;
}

/**
 * Degraded while the store is in its cool-down (it timed out recently: calls skip it and are
 * answered from values held here or by their loaders) or while values are served stale because
 * their refresh failed (fail-safe). Returns the details to add and the warnings (none: up).
 */
export function stampedeHealthWarnings(facts: StampedeHealthFacts): {
  details: Record<string, unknown>;
  warnings: string[];
} {
  const details: Record<string, unknown> = {};
  const warnings: string[] = [];
  if (facts.cooldownMs > 0) {
    details.cooldownMs = facts.cooldownMs;
    warnings.push(
      `the store timed out recently: calls skip it for ${facts.cooldownMs} ms more (cooldown)`,
    );
  }
  const { failSafe } = facts;
  if (failSafe) {
    details.failSafe = {
      keys: failSafe.keys,
      methods: failSafe.methods,
      forMs: Math.max(0, facts.now - failSafe.since),
    };
    warnings.push(
      `${failSafe.keys} value(s) served stale because their refresh failed (fail-safe): ${failSafe.methods.join(', ')}`,
    );
  }
  return { details, warnings };
}

/** The part of terminus' HealthIndicatorSession used here; `degraded` exists from terminus 12 on. */
export interface HealthSessionLike<R> {
  up(data: Record<string, unknown>): R;
  degraded?: (data: Record<string, unknown>) => R;
}

/**
 * Reports a working check with warnings: `degraded` with the warnings as `message` where terminus
 * has that status (12 and later: the overall status becomes `degraded`, HTTP 200), else `up` with
 * the warnings as `warning` (terminus 11: the status is what it was before warnings existed).
 */
export function reportWarnings<R>(
  session: HealthSessionLike<R>,
  details: Record<string, unknown>,
  warnings: readonly string[],
): R {
  if (warnings.length === 0) return session.up(details);
  const message = warnings.join('; ');
  return typeof session.degraded === 'function'
    ? session.degraded({ ...details, message })
    : session.up({ ...details, warning: message });
}
