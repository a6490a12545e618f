import type { HealthIndicatorResult } from '@nestjs/terminus';

/** One dependency: `up`, `down`, or `degraded` (down, but the app serves without it). */
export type DependencyStatus = 'up' | 'down' | 'degraded';

export interface HealthReport {
  /** ok: all up; degraded: an optional dependency is down; error: a required one is down. */
  status: 'ok' | 'degraded' | 'error';
  details: Record<string, { status: DependencyStatus; [detail: string]: unknown }>;
}

/**
 * The verdict over terminus indicator results: any `required` one down is an error (the app
 * cannot serve: 503); an `optional` one down (the cache) is reported `degraded` and the app
 * stays ready (200).
 */
export function healthReport(
  required: HealthIndicatorResult[],
  optional: HealthIndicatorResult[],
): HealthReport {
  const details: HealthReport['details'] = {};
  let status: HealthReport['status'] = 'ok';
  for (const result of required) {
    for (const [key, detail] of Object.entries(result)) {
      details[key] = detail as HealthReport['details'][string];
      if (detail.status !== 'up') status = 'error';
    }
  }
  for (const result of optional) {
    for (const [key, detail] of Object.entries(result)) {
      const up = detail.status === 'up';
      details[key] = { ...detail, status: up ? 'up' : 'degraded' };
      if (!up && status === 'ok') status = 'degraded';
    }
  }
  return { status, details };
}
