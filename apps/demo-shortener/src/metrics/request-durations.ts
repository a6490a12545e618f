import type { Histogram } from 'prom-client';

type Labels = 'method' | 'route' | 'status_code';

/**
 * Feeds the request-duration histogram in batches: a request only notes its series and duration
 * in two typed arrays; prom-client's observe (label checks, hashing, bucket search) then runs for
 * a whole batch at once, when the batch is full and before the histogram is read (its `collect`,
 * which prom-client calls on every scrape). On a cached redirect, the per-request observe was
 * one of the largest costs after Nest itself. What /metrics shows is the same: every request,
 * observed by the time it is scraped.
 */
export class RequestDurations {
  /** Series index by method, route pattern and status code. */
  private readonly index = new Map<string, Map<string, Map<number, number>>>();
  private readonly series: { observe(value: number): void }[] = [];
  private readonly seriesOf: Uint32Array;
  private readonly seconds: Float64Array;
  private pending = 0;

  constructor(
    private readonly histogram: Histogram<Labels>,
    capacity = 1024,
  ) {
    this.seriesOf = new Uint32Array(capacity);
    this.seconds = new Float64Array(capacity);
  }

  record(method: string, route: string, statusCode: number, seconds: number): void {
    const i = this.pending;
    this.seriesOf[i] = this.seriesIndex(method, route, statusCode);
    this.seconds[i] = seconds;
    this.pending = i + 1;
    if (this.pending === this.seconds.length) this.flush();
  }

  /** Observes the noted durations. */
  flush(): void {
    const n = this.pending;
    this.pending = 0;
    for (let i = 0; i < n; i++) this.series[this.seriesOf[i]].observe(this.seconds[i]);
  }

  private seriesIndex(method: string, route: string, statusCode: number): number {
    let byRoute = this.index.get(method);
    if (!byRoute) this.index.set(method, (byRoute = new Map()));
    let byStatus = byRoute.get(route);
    if (!byStatus) byRoute.set(route, (byStatus = new Map()));
    let index = byStatus.get(statusCode);
    if (index === undefined) {
      // Routes are patterns and methods and status codes are few: the series stay few.
      index = this.series.length;
      this.series.push(this.histogram.labels({ method, route, status_code: String(statusCode) }));
      byStatus.set(statusCode, index);
    }
    return index;
  }
}
