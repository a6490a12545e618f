import { formatTraceparent, parseTraceparent } from './trace-context';

describe('W3C traceparent', () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const spanId = '00f067aa0ba902b7';

  it('formats and parses back', () => {
    const header = formatTraceparent(traceId, spanId, 1);
    expect(header).toBe(`00-${traceId}-${spanId}-01`);
    expect(parseTraceparent(header)).toEqual({ traceId, spanId, traceFlags: 1 });
  });

  it('rejects malformed values, version ff and all-zero ids', () => {
    for (const bad of [
      undefined,
      '',
      'garbage',
      `00-${traceId}-${spanId}`,
      `00-${traceId.toUpperCase()}-${spanId}-01`,
      `ff-${traceId}-${spanId}-01`,
      `00-${'0'.repeat(32)}-${spanId}-01`,
      `00-${traceId}-${'0'.repeat(16)}-01`,
      `00-${traceId}-${spanId}-01-extra`,
    ])
      expect(parseTraceparent(bad)).toBeUndefined();
  });

  it('accepts a later version with extra parts', () => {
    expect(parseTraceparent(`01-${traceId}-${spanId}-00-what-comes`)).toEqual({
      traceId,
      spanId,
      traceFlags: 0,
    });
  });
});
