import { Histogram, Registry } from 'prom-client';
import { RequestDurations } from './request-durations';

function setup(capacity?: number, flushOnRead = true) {
  const registry = new Registry();
  const flushed: { durations?: RequestDurations } = {};
  const histogram = new Histogram({
    name: 'test_request_duration_seconds',
    help: 'test',
    labelNames: ['method', 'route', 'status_code'],
    buckets: [0.001, 0.01, 0.1],
    registers: [registry],
    ...(flushOnRead ? { collect: () => flushed.durations!.flush() } : {}),
  });
  const durations = new RequestDurations(histogram, capacity);
  flushed.durations = durations;
  return { registry, histogram, durations };
}

describe('RequestDurations', () => {
  it('shows every recorded request when the registry is read, by series and bucket', async () => {
    const { registry, durations } = setup();
    for (let i = 0; i < 5; i++) durations.record('GET', '/:code', 302, 0.0005);
    durations.record('GET', '/:code', 302, 0.05);
    durations.record('GET', '/:code', 404, 0.002);
    durations.record('POST', '/urls', 201, 0.2);
    durations.record('GET', 'unmatched', 404, 0.0001);

    const text = await registry.metrics();
    const line = (suffix: string, labels: string) =>
      new RegExp(`^test_request_duration_seconds_${suffix}\\{${labels}\\} (\\S+)$`, 'm').exec(
        text,
      )?.[1];
    expect(line('count', 'method="GET",route="/:code",status_code="302"')).toBe('6');
    expect(line('bucket', 'le="0.001",method="GET",route="/:code",status_code="302"')).toBe('5');
    expect(line('bucket', 'le="0.1",method="GET",route="/:code",status_code="302"')).toBe('6');
    expect(Number(line('sum', 'method="GET",route="/:code",status_code="302"'))).toBeCloseTo(
      0.0525,
    );
    expect(line('count', 'method="GET",route="/:code",status_code="404"')).toBe('1');
    expect(line('bucket', 'le="0.01",method="POST",route="/urls",status_code="201"')).toBe('0');
    expect(line('count', 'method="POST",route="/urls",status_code="201"')).toBe('1');
    expect(line('count', 'method="GET",route="unmatched",status_code="404"')).toBe('1');
  });

  it('hands each full batch to the histogram without waiting for a read', async () => {
    const { histogram, durations } = setup(4, false);
    const count = async () =>
      (await histogram.get()).values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
    for (let i = 0; i < 9; i++) durations.record('GET', '/:code', 302, 0.0005);
    expect(await count()).toBe(8);
    durations.flush();
    expect(await count()).toBe(9);
  });

  it('counts nothing twice across reads', async () => {
    const { registry, durations } = setup();
    durations.record('GET', '/:code', 302, 0.0005);
    await registry.metrics();
    durations.record('GET', '/:code', 302, 0.0005);
    const text = await registry.metrics();
    expect(text).toMatch(
      /^test_request_duration_seconds_count\{method="GET",route="\/:code",status_code="302"\} 2$/m,
    );
  });
});
