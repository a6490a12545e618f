/** A trade tick as the collector publishes it. `ts` is the tick's own time in ms since the epoch. */
export interface Tick {
  symbol: string;
  price: number;
  qty: number;
  ts: number;
}

export type TickParseResult = { ok: true; tick: Tick } | { ok: false; error: string };

/** Bounds of a valid tick (the `limits` configuration namespace). */
export interface TickLimits {
  /** Largest accepted price and quantity: they keep candle sums finite. */
  maxPrice: number;
  maxQty: number;
  /** How far `ts` may lie before / after the time the tick reached the stream, in ms. */
  maxAgeMs: number;
  maxFutureMs: number;
}

/** The defaults of the `TICK_MAX_*` variables. */
export const DEFAULT_TICK_LIMITS: TickLimits = {
  maxPrice: 1e12,
  maxQty: 1e12,
  maxAgeMs: 86_400_000,
  maxFutureMs: 60_000,
};

/** Letters, digits, '.', '_' and '-', 1 to 32 characters, starting with a letter or digit. */
export const SYMBOL_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$/;

/**
 * A number, or a string that is entirely a decimal number (entries written by other producers,
 * e.g. `redis-cli XADD ticks * symbol BTC price 1`, carry strings).
 */
function toNumber(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'string' && /^\s*-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(value)) {
    const n = Number(value);
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

/**
 * Validates a tick payload. Never throws: a payload that is not a tick gives the reason, which
 * names the field and what it must be. `price` and `qty` must not exceed `limits`.
 */
export function parseTick(
  payload: unknown,
  limits: Pick<TickLimits, 'maxPrice' | 'maxQty'> = DEFAULT_TICK_LIMITS,
): TickParseResult {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload))
    return { ok: false, error: 'a tick must be an object { symbol, price, qty, ts }' };
  const raw = payload as Record<string, unknown>;
  const problems: string[] = [];
  const { symbol } = raw;
  if (symbol === undefined) problems.push('symbol is missing');
  else if (typeof symbol !== 'string' || !SYMBOL_PATTERN.test(symbol))
    problems.push(`symbol must be 1-32 characters of A-Z a-z 0-9 . _ - (got ${show(symbol)})`);
  const price = toNumber(raw.price);
  if (raw.price === undefined) problems.push('price is missing');
  else if (price === undefined || price <= 0)
    problems.push(`price must be a positive number (got ${show(raw.price)})`);
  else if (price > limits.maxPrice)
    problems.push(`price must be at most ${limits.maxPrice} (got ${show(raw.price)})`);
  const qty = toNumber(raw.qty);
  if (raw.qty === undefined) problems.push('qty is missing');
  else if (qty === undefined || qty <= 0)
    problems.push(`qty must be a positive number (got ${show(raw.qty)})`);
  else if (qty > limits.maxQty)
    problems.push(`qty must be at most ${limits.maxQty} (got ${show(raw.qty)})`);
  const ts = toNumber(raw.ts);
  if (raw.ts === undefined) problems.push('ts is missing');
  else if (ts === undefined || !Number.isSafeInteger(ts) || ts < 0)
    problems.push(`ts must be a whole number of ms since the epoch (got ${show(raw.ts)})`);
  if (problems.length > 0) return { ok: false, error: `invalid tick: ${problems.join('; ')}` };
  return { ok: true, tick: { symbol: symbol as string, price: price!, qty: qty!, ts: ts! } };
}

function show(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : String(value);
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}

/**
 * Checks that a tick's `ts` lies within the window around `arrivedAt`, the time the tick reached
 * the stream (its entry id's time, set by Redis): a redelivery, or a backlog handled late, is
 * judged as when it arrived. Returns the reason when it does not, else undefined.
 */
export function checkTickTime(
  ts: number,
  arrivedAt: number,
  limits: Pick<TickLimits, 'maxAgeMs' | 'maxFutureMs'>,
): string | undefined {
  const when = `the tick reached the stream (${new Date(arrivedAt).toISOString()})`;
  if (ts - arrivedAt > limits.maxFutureMs)
    return `ts ${ts} is ${describeDuration(ts - arrivedAt)} after ${when}; at most ${limits.maxFutureMs} ms ahead is accepted (TICK_MAX_FUTURE_MS)`;
  if (arrivedAt - ts > limits.maxAgeMs)
    return `ts ${ts} is ${describeDuration(arrivedAt - ts)} before ${when}; at most ${limits.maxAgeMs} ms back is accepted (TICK_MAX_AGE_MS)`;
  return undefined;
}

/** A duration for people: `850 ms`, `12.5 s`, `10.0 min`, `3.2 h`, `2.0 days`, `285616 years`. */
export function describeDuration(ms: number): string {
  const units: [number, string][] = [
    [365.25 * 86_400_000, 'years'],
    [86_400_000, 'days'],
    [3_600_000, 'h'],
    [60_000, 'min'],
    [1000, 's'],
  ];
  for (const [size, name] of units)
    if (ms >= 2 * size || (size === 1000 && ms >= size)) {
      const n = ms / size;
      return `${n >= 1000 ? Math.round(n) : n.toFixed(1)} ${name}`;
    }
  return `${ms} ms`;
}
