import type { Histogram } from 'prom-client';

type Labels = 'method' | 'route' | 'status_code';
type Value = { metricName: string; labels: Record<string, string | number>; value: number };

/**
 * The request-duration histogram, counted here: a request finds its series in three small maps
 * and adds one to its bucket in a typed array. prom-client's own `observe` builds a labels object,
 * checks the labels and hashes them on every call (about 0.45 µs, some 2 % of a cached redirect's
 * CPU). The registry reads this metric through `get()` as it reads its own histograms, and
 * /metrics shows the same series in the same text.
 */
export class RequestDurations {
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;
  /** Series index by method, route pattern and status code. */
  private readonly index = new Map<string, Map<string, Map<number, number>>>();
  private readonly labels: Record<Labels, string>[] = [];
  /** Per series, the count of each bucket (the last one: above every bound), not cumulative. */
  private counts = new Float64Array(0);
  private sums: number[] = [];
  private readonly width: number;

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
  ) {
    this.width = bounds.length + 1;
  }

  record(method: string, route: string, statusCode: number, seconds: number): void {
    const series = this.seriesIndex(method, route, statusCode);
    let bucket = 0;
    while (bucket < this.bounds.length && seconds > this.bounds[bucket]) bucket++;
    this.counts[series * this.width + bucket]++;
    this.sums[series] += seconds;
  }

  /** What prom-client's Registry reads of a metric (the shape of its Histogram's `get()`). */
  get(): Promise<Pick<this, 'name' | 'help' | 'type' | 'aggregator'> & { values: Value[] }> {
    const values: Value[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const [series, labels] of this.labels.entries()) {
      let total = 0;
      for (let b = 0; b < this.width; b++) {
        total += this.counts[series * this.width + b];
        const le = b < this.bounds.length ? this.bounds[b] : '+Inf';
        values.push({ metricName: bucketName, labels: { le, ...labels }, value: total });
      }
      values.push({ metricName: `${this.name}_sum`, labels, value: this.sums[series] });
      values.push({ metricName: `${this.name}_count`, labels, value: total });
    }
    const { name, help, type, aggregator } = this;
    return Promise.resolve({ name, help, type, aggregator, values });
  }

  reset(): void {
    this.counts.fill(0);
    this.sums.fill(0);
  }

  /** For registry.registerMetric(), whose type names only prom-client's own classes. */
  asMetric(): Histogram<Labels> {
    return this as unknown as Histogram<Labels>;
  }

  private seriesIndex(method: string, route: string, statusCode: number): number {
    let byRoute = this.index.get(method);
    if (!byRoute) this.index.set(method, (byRoute = new Map()));
    let byStatus = byRoute.get(route);
    if (!byStatus) byRoute.set(route, (byStatus = new Map()));
    let index = byStatus.get(statusCode);
    if (index === undefined) {
      // Routes are patterns and methods and status codes are few: the series stay few.
      index = this.labels.length;
      this.labels.push({ method, route, status_code: String(statusCode) });
      this.sums.push(0);
      const counts = new Float64Array(this.labels.length * this.width);
      counts.set(this.counts);
      this.counts = counts;
      byStatus.set(statusCode, index);
    }
    return index;
  }
}
