import { Injectable } from '@nestjs/common';
import { StampedeService } from '@nest-redis-resilience/stampede';
import type { MethodMetrics } from '@nest-redis-resilience/stampede';
import { Counter, Registry } from 'prom-client';

/** Prometheus names of the stampede counters (see MethodMetrics in @nest-redis-resilience/stampede). */
const STAMPEDE_COUNTERS: Record<keyof MethodMetrics, [string, string]> = {
  calls: ['calls_total', 'Calls of the cached method'],
  hits: ['hits_total', 'Calls answered from the cache'],
  misses: ['misses_total', 'Calls that found no cached value'],
  loads: ['loads_total', 'Loader executions'],
  joins: ['joins_total', 'Calls that joined a load in flight in this process (single-flight)'],
  lockWaits: ['lock_waits_total', "Times a caller waited for another caller's lock"],
  lockWaitMs: ['lock_wait_ms_total', 'Milliseconds spent waiting for locks'],
  lockTimeouts: ['lock_timeouts_total', 'Lock waits that gave up and loaded without the lock'],
  earlyRecomputes: ['early_recomputes_total', 'XFetch recomputations before expiry'],
  l1Hits: ['l1_hits_total', 'Calls answered from the in-process tier'],
  staleServes: ['stale_serves_total', 'Calls served while an early recomputation ran'],
  failSafes: ['fail_safes_total', 'Failed refreshes within grace: the stale value was kept'],
  timeouts: ['timeouts_total', 'Loads past their hard timeout'],
  errors: ['errors_total', 'Loader errors'],
  storeErrors: ['store_errors_total', 'Cache operations that failed (Redis down or slow)'],
};

/**
 * The app's Prometheus registry (one per app, so two apps in one process keep their own):
 * `shortener_db_lookups_total` and the stampede counters of the cached lookup, per method.
 */
@Injectable()
export class ShortenerMetrics {
  readonly registry = new Registry();
  private readonly dbLookups: Counter<'result'>;

  constructor(stampede: StampedeService) {
    this.dbLookups = new Counter({
      name: 'shortener_db_lookups_total',
      help: 'Lookups of a code in the database (cache misses, or every redirect with the cache off)',
      labelNames: ['result'],
      registers: [this.registry],
    });
    this.dbLookups.inc({ result: 'found' }, 0);
    this.dbLookups.inc({ result: 'not_found' }, 0);
    for (const [field, [suffix, help]] of Object.entries(STAMPEDE_COUNTERS)) {
      new Counter({
        name: `shortener_stampede_${suffix}`,
        help: `${help} (from @nest-redis-resilience/stampede)`,
        labelNames: ['method'],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const [method, m] of Object.entries(stampede.metrics())) {
            this.inc({ method }, m[field as keyof MethodMetrics]);
          }
        },
      });
    }
  }

  countLookup(found: boolean): void {
    this.dbLookups.inc({ result: found ? 'found' : 'not_found' });
  }

  /** Database lookups since start-up (what tests and benchmarks compare). */
  async dbLookupCount(): Promise<number> {
    const { values } = await this.dbLookups.get();
    return values.reduce((sum, v) => sum + v.value, 0);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
