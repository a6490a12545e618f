/** A trade tick as the collector publishes it. `ts` is the tick's own time in ms since the epoch. */
export interface Tick {
  symbol: string;
  price: number;
  qty: number;
  ts: number;
}

export type TickParseResult = { ok: true; tick: Tick } | { ok: false; error: string };

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
 * names the field and what it must be.
 */
export function parseTick(payload: unknown): TickParseResult {
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
  const qty = toNumber(raw.qty);
  if (raw.qty === undefined) problems.push('qty is missing');
  else if (qty === undefined || qty <= 0)
    problems.push(`qty must be a positive number (got ${show(raw.qty)})`);
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
