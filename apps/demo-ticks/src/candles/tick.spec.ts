import { parseTick } from './tick';

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
