import { Histogram, Registry } from 'prom-client';
import { RequestDurations } from './request-durations';

const BUCKETS = [0.001, 0.01, 0.1];
const LABELS = ['method', 'route', 'status_code'] as const;

function setup() {
  const registry = new Registry();
  const durations = new RequestDurations('test_request_duration_seconds', 'test', BUCKETS);
  registry.registerMetric(durations.asMetric());
  return { registry, durations };
}

/** The same observations in prom-client's own Histogram: what /metrics showed before. */
async function promClientText(observed: [string, string, number, number][]): Promise<string> {
  const registry = new Registry();
  const histogram = new Histogram({
    name: 'test_request_duration_seconds',
    help: 'test',
    labelNames: LABELS,
    buckets: BUCKETS,
    registers: [registry],
  });
  for (const [method, route, status, seconds] of observed)
    histogram.labels({ method, route, status_code: String(status) }).observe(seconds);
  return registry.metrics();
}

describe('RequestDurations', () => {
  const observed: [string, string, number, number][] = [
    ...Array.from({ length: 5 }, (): [string, string, number, number] => [
      'GET',
      '/:code',
      302,
      0.0005,
    ]),
    ['GET', '/:code', 302, 0.05],
    ['GET', '/:code', 404, 0.002],
    ['POST', '/urls', 201, 0.2],
    ['GET', 'unmatched', 404, 0.0001],
    ['GET', '/:code', 302, 0.01], // on a bound: in that bucket, as Prometheus counts
    ['GET', '/:code', 302, 30], // above every bound: +Inf only
  ];

  it('shows every recorded request by series and bucket, in the text prom-client writes', async () => {
    const { registry, durations } = setup();
    for (const [method, route, status, seconds] of observed)
      durations.record(method, route, status, seconds);

    const text = await registry.metrics();
    expect(text).toBe(await promClientText(observed));
    const line = (suffix: string, labels: string) =>
      new RegExp(`^test_request_duration_seconds_${suffix}\\{${labels}\\} (\\S+)$`, 'm').exec(
        text,
      )?.[1];
    expect(line('count', 'method="GET",route="/:code",status_code="302"')).toBe('8');
    expect(line('bucket', 'le="0.001",method="GET",route="/:code",status_code="302"')).toBe('5');
    expect(line('bucket', 'le="0.01",method="GET",route="/:code",status_code="302"')).toBe('6');
    expect(line('bucket', 'le="0.1",method="GET",route="/:code",status_code="302"')).toBe('7');
    expect(line('bucket', 'le="\\+Inf",method="GET",route="/:code",status_code="302"')).toBe('8');
    expect(Number(line('sum', 'method="GET",route="/:code",status_code="302"'))).toBeCloseTo(
      30.0625,
    );
    expect(line('count', 'method="POST",route="/urls",status_code="201"')).toBe('1');
    expect(line('count', 'method="GET",route="unmatched",status_code="404"')).toBe('1');
  });

  it('counts nothing twice across reads, and keeps counting after a reset', async () => {
    const { registry, durations } = setup();
    durations.record('GET', '/:code', 302, 0.0005);
    await registry.metrics();
    durations.record('GET', '/:code', 302, 0.0005);
    expect(await registry.metrics()).toMatch(
      /^test_request_duration_seconds_count\{method="GET",route="\/:code",status_code="302"\} 2$/m,
    );
    registry.resetMetrics();
    durations.record('GET', '/:code', 302, 0.0005);
    expect(await registry.metrics()).toBe(await promClientText([['GET', '/:code', 302, 0.0005]]));
  });

  it('is read as JSON as prom-client histograms are', async () => {
    const { registry, durations } = setup();
    durations.record('GET', '/:code', 302, 0.0005);
    const [metric] = await registry.getMetricsAsJSON();
    expect(metric).toMatchObject({ name: 'test_request_duration_seconds', type: 'histogram' });
    expect(metric.values).toContainEqual({
      metricName: 'test_request_duration_seconds_count',
      labels: { method: 'GET', route: '/:code', status_code: '302' },
      value: 1,
    });
  });
});
