import { Tick } from '../candles/tick';

/** mulberry32: a small seeded PRNG (uniform in [0, 1)). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `SYM001`, `SYM002`, ... */
export function symbolNames(count: number): string[] {
  const width = Math.max(3, String(count).length);
  return Array.from({ length: count }, (_, i) => `SYM${String(i + 1).padStart(width, '0')}`);
}

/**
 * Synthetic ticks: a geometric random walk per symbol (prices in cents, never below 0.01) and
 * whole-number quantities from 1 to 100, so that volume sums are exact.
 */
export class RandomWalk {
  readonly symbols: string[];
  private readonly prices: number[];
  private readonly random: () => number;

  constructor(symbolCount: number, seed = 0, volatility = 0.0005) {
    this.random = seededRandom(seed || Math.floor(Math.random() * 2 ** 32));
    this.symbols = symbolNames(symbolCount);
    this.prices = this.symbols.map(() => 10 + Math.floor(this.random() * 99_000) / 100);
    this.volatility = volatility;
  }

  private readonly volatility: number;

  /** The next tick of symbol number `index` (0-based), at time `ts`. */
  next(index: number, ts: number): Tick {
    const step = (this.random() * 2 - 1) * this.volatility * Math.sqrt(3);
    const price = Math.max(0.01, Math.round(this.prices[index] * Math.exp(step) * 100) / 100);
    this.prices[index] = price;
    const qty = 1 + Math.floor(this.random() * 100);
    return { symbol: this.symbols[index], price, qty, ts };
  }
}
