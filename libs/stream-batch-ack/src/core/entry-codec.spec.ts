import { backoffDelay } from './backoff';
import { compareStreamIds, decodeEntry, encodePayload } from './entry-codec';

describe('entry codec', () => {
  it('decodes the client format (a single JSON "data" field)', () => {
    expect(decodeEntry(encodePayload({ symbol: 'BTC', price: 1 }))).toEqual({
      ok: true,
      payload: { symbol: 'BTC', price: 1 },
      fields: { data: '{"symbol":"BTC","price":1}' },
      headers: {},
    });
    expect(decodeEntry(encodePayload(undefined))).toMatchObject({ ok: true, payload: null });
  });

  it('reports malformed JSON instead of throwing', () => {
    const decoded = decodeEntry(['data', '{bad']);
    expect(decoded.ok).toBe(false);
    expect(decoded.fields).toEqual({ data: '{bad' });
  });

  it('delivers entries of other producers as a plain object of their fields', () => {
    expect(decodeEntry(['symbol', 'BTC', 'price', '1'])).toEqual({
      ok: true,
      payload: { symbol: 'BTC', price: '1' },
      fields: { symbol: 'BTC', price: '1' },
      headers: {},
    });
    expect(decodeEntry(['data', 'not json', 'other', 'x'])).toMatchObject({
      ok: true,
      payload: { data: 'not json', other: 'x' },
    });
  });

  it('carries headers and the request fields of send()', () => {
    const flat = encodePayload(
      { a: 1 },
      { traceparent: '00-abc-def-01' },
      { id: 'c1', replyTo: 'r' },
    );
    expect(decodeEntry(flat)).toMatchObject({
      ok: true,
      payload: { a: 1 },
      headers: { traceparent: '00-abc-def-01' },
      request: { id: 'c1', replyTo: 'r' },
    });
    expect(encodePayload(1, {})).toEqual(['data', '1']);
  });

  it('reports malformed headers and half a request', () => {
    expect(decodeEntry(['data', '1', 'headers', '[1]'])).toMatchObject({
      ok: false,
      error: '"headers" must be a JSON object',
    });
    expect(decodeEntry(['data', '1', 'headers', '{"n":1}'])).toMatchObject({
      ok: false,
      error: '"headers" values must be strings',
    });
    expect(decodeEntry(['data', '1', 'id', 'c1'])).toMatchObject({ ok: false });
  });

  it('compares stream ids numerically', () => {
    expect(compareStreamIds('9-0', '10-0')).toBe(-1);
    expect(compareStreamIds('10-2', '10-10')).toBe(-1);
    expect(compareStreamIds('10-2', '10-2')).toBe(0);
    expect(compareStreamIds('11-0', '10-99')).toBe(1);
  });
});

describe('backoffDelay', () => {
  it('grows exponentially, is capped and jittered within bounds', () => {
    const mid = () => 0.5;
    expect(
      [1, 2, 3, 4, 10].map((a) => backoffDelay(a, { initialMs: 50, maxMs: 1000 }, mid)),
    ).toEqual([50, 100, 200, 400, 1000]);
    expect(backoffDelay(1, { initialMs: 100, jitter: 0.2 }, () => 0)).toBe(80);
    expect(backoffDelay(1, { initialMs: 100, jitter: 0.2 }, () => 1)).toBe(120);
  });
});
