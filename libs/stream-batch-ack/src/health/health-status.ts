/**
 * The health decision of RedisStreamsHealthIndicator, without terminus: which thresholds a
 * group's pending count and lag cross, and how a warning is reported by the terminus installed.
 */

/** The thresholds of `isHealthy()`: `max*` make the check down, `warn*` degraded. */
export interface StreamHealthThresholds {
  maxLag?: number;
  maxPending?: number;
  warnLag?: number;
  warnPending?: number;
}

export interface StreamHealthVerdict {
  status: 'up' | 'degraded' | 'down';
  /** What crossed a hard threshold (`pending 12 > 10`). */
  problems: string[];
  /** What crossed a warning threshold only (`lag 30 > 20 (warnLag)`). */
  warnings: string[];
}

/**
 * Down when `pending` or `lag` is above its `max*` bound, degraded when above its `warn*` bound
 * only, up otherwise. An unknown lag (`null`: Redis before 7, or a partition that cannot tell)
 * crosses nothing.
 */
export function streamHealthVerdict(
  stats: { pending: number; lag: number | null },
  thresholds: StreamHealthThresholds,
): StreamHealthVerdict {
  const problems: string[] = [];
  const warnings: string[] = [];
  const check = (name: 'pending' | 'lag', value: number | null, max?: number, warn?: number) => {
    if (value === null) return;
    if (max !== undefined && value > max) problems.push(`${name} ${value} > ${max}`);
    else if (warn !== undefined && value > warn)
      warnings.push(`${name} ${value} > ${warn} (${name === 'lag' ? 'warnLag' : 'warnPending'})`);
  };
  check('pending', stats.pending, thresholds.maxPending, thresholds.warnPending);
  check('lag', stats.lag, thresholds.maxLag, thresholds.warnLag);
  const status = problems.length > 0 ? 'down' : warnings.length > 0 ? 'degraded' : 'up';
  return { status, problems, warnings };
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
  const message = warnings.join(', ');
  return typeof session.degraded === 'function'
    ? session.degraded({ ...details, message })
    : session.up({ ...details, warning: message });
}
