import { checkTickTime, DEFAULT_TICK_LIMITS, describeDuration, parseTick } from './tick';

describe('parseTick', () => {
  const valid = { symbol: 'BTC-USD', price: 101.25, qty: 0.5, ts: 1_700_000_000_000 };

  it('accepts a tick and returns its numbers', () => {
    expect(parseTick(valid)).toEqual({ ok: true, tick: valid });
  });

  it('accepts numeric strings (entries written by redis-cli carry strings)', () => {
    expect(parseTick({ symbol: 'BTC', price: '1.5', qty: '2', ts: '1700000000000' })).toEqual({
      ok: true,
      tick: { symbol: 'BTC', price: 1.5, qty: 2, ts: 1_700_000_000_000 },
    });
  });

  it.each([
    [{ ...valid, price: undefined }, 'price is missing'],
    [{ ...valid, qty: undefined }, 'qty is missing'],
    [{ ...valid, ts: undefined }, 'ts is missing'],
    [{ ...valid, symbol: undefined }, 'symbol is missing'],
    [{ ...valid, price: 'abc' }, 'price must be a positive number (got "abc")'],
    [{ ...valid, price: '' }, 'price must be a positive number'],
    [{ ...valid, price: '12abc' }, 'price must be a positive number'],
    [{ ...valid, price: -1 }, 'price must be a positive number (got -1)'],
    [{ ...valid, price: 0 }, 'price must be a positive number'],
    [{ ...valid, price: null }, 'price must be a positive number'],
    [{ ...valid, price: true }, 'price must be a positive number'],
    [{ ...valid, qty: 0 }, 'qty must be a positive number'],
    [{ ...valid, qty: 'NaN' }, 'qty must be a positive number'],
    [{ ...valid, qty: 'Infinity' }, 'qty must be a positive number'],
    [{ ...valid, ts: 1.5 }, 'ts must be a whole number of ms'],
    [{ ...valid, ts: -5 }, 'ts must be a whole number of ms'],
    [{ ...valid, ts: '2024-01-01' }, 'ts must be a whole number of ms'],
    [{ ...valid, symbol: '' }, 'symbol must be'],
    [{ ...valid, symbol: 'a:b' }, 'symbol must be'],
    [{ ...valid, symbol: 'x'.repeat(33) }, 'symbol must be'],
    [{ ...valid, symbol: 42 }, 'symbol must be'],
  ])('rejects %j with a reason', (payload, reason) => {
    const result = parseTick(payload);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toContain(reason);
  });

  it('names every problem at once', () => {
    const result = parseTick({ symbol: 'BTC' });
    expect(result).toEqual({
      ok: false,
      error: 'invalid tick: price is missing; qty is missing; ts is missing',
    });
  });

  it.each([null, 'tick', 42, [1, 2]])('rejects a payload that is not an object: %j', (payload) => {
    expect(parseTick(payload)).toEqual({
      ok: false,
      error: 'a tick must be an object { symbol, price, qty, ts }',
    });
  });
});

describe('parseTick with limits', () => {
  const tick = { symbol: 'BTC', price: 10, qty: 2, ts: 1_700_000_000_000 };

  it('rejects a price or a quantity above its maximum (default 1e12), naming the bound', () => {
    expect(DEFAULT_TICK_LIMITS).toMatchObject({ maxPrice: 1e12, maxQty: 1e12 });
    expect(parseTick({ ...tick, qty: 1e308 })).toEqual({
      ok: false,
      error: 'invalid tick: qty must be at most 1000000000000 (got 1e+308)',
    });
    expect(parseTick({ ...tick, price: '2e12' })).toEqual({
      ok: false,
      error: 'invalid tick: price must be at most 1000000000000 (got "2e12")',
    });
    expect(parseTick({ ...tick, qty: 1e12, price: 1e12 }).ok).toBe(true);
  });

  it('takes other maxima', () => {
    const limits = { maxPrice: 100, maxQty: 1e308 };
    expect(parseTick({ ...tick, qty: 1e308 }, limits).ok).toBe(true);
    expect(parseTick({ ...tick, price: 100.01 }, limits)).toMatchObject({ ok: false });
  });
});

describe('checkTickTime', () => {
  const arrivedAt = Date.UTC(2026, 0, 1);
  const limits = { maxAgeMs: 86_400_000, maxFutureMs: 60_000 };

  it('accepts ts from maxAgeMs before to maxFutureMs after the arrival, bounds included', () => {
    for (const ts of [arrivedAt, arrivedAt - 86_400_000, arrivedAt + 60_000])
      expect(checkTickTime(ts, arrivedAt, limits)).toBeUndefined();
  });

  it('says how far off a tick is and which variable bounds it', () => {
    expect(checkTickTime(arrivedAt + 60_001, arrivedAt, limits)).toBe(
      'ts 1767225660001 is 60.0 s after the tick reached the stream (2026-01-01T00:00:00.000Z); at most 60000 ms ahead is accepted (TICK_MAX_FUTURE_MS)',
    );
    expect(checkTickTime(arrivedAt - 86_400_001, arrivedAt, limits)).toBe(
      'ts 1767139199999 is 24.0 h before the tick reached the stream (2026-01-01T00:00:00.000Z); at most 86400000 ms back is accepted (TICK_MAX_AGE_MS)',
    );
    expect(checkTickTime(2 ** 53 - 1, arrivedAt, limits)).toContain('is 285365 years after');
  });
});

describe('describeDuration', () => {
  it.each([
    [0, '0 ms'],
    [999, '999 ms'],
    [1500, '1.5 s'],
    [119_999, '120.0 s'],
    [600_000, '10.0 min'],
    [2 * 86_400_000, '2.0 days'],
    [3 * 365.25 * 86_400_000, '3.0 years'],
  ])('%d ms is %s', (ms, text) => {
    expect(describeDuration(ms)).toBe(text);
  });
});
