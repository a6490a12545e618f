import { writeFileSync } from 'node:fs';
import { AppProcess } from '../../support/app-process';

export interface TickFile {
  file: string;
  count: number;
  /** Per symbol: the sum of qty and the number of ticks. */
  expected: Map<string, { volume: number; trades: number }>;
}

/**
 * Writes `count` ticks over `symbols` symbols named `<prefix>00`, `<prefix>01`, ... as JSON lines
 * for the collector's COLLECTOR_REPLAY_FILE, with whole-number quantities (sums are exact) and
 * `ts` now (within the consumer's time window).
 */
export function writeTicks(file: string, prefix: string, symbols: number, count: number): TickFile {
  const expected = new Map<string, { volume: number; trades: number }>();
  const lines: string[] = [];
  const now = Date.now();
  for (let i = 0; i < count; i++) {
    const symbol = `${prefix}${String(i % symbols).padStart(2, '0')}`;
    const qty = 1 + ((i * 7919) % 100);
    const price = 100 + ((i * 31) % 50) / 10;
    lines.push(JSON.stringify({ symbol, price, qty, ts: now + Math.floor(i / 100) }));
    const e = expected.get(symbol) ?? { volume: 0, trades: 0 };
    e.volume += qty;
    e.trades += 1;
    expected.set(symbol, e);
  }
  writeFileSync(file, lines.join('\n') + '\n');
  return { file, count, expected };
}

/** What the candles (all 30m candles of each symbol, summed) say: volume and trades per symbol. */
export async function candleTotals(
  baseUrl: string,
  symbols: Iterable<string>,
): Promise<Map<string, { volume: number; trades: number }>> {
  const out = new Map<string, { volume: number; trades: number }>();
  for (const symbol of symbols) {
    const res = await fetch(`${baseUrl}/symbols/${symbol}/candles?interval=30m&limit=50`);
    const body = (res.status === 200 ? await res.json() : { candles: [] }) as {
      candles: { volume: number; trades: number }[];
    };
    out.set(symbol, {
      volume: body.candles.reduce((s, c) => s + c.volume, 0),
      trades: body.candles.reduce((s, c) => s + c.trades, 0),
    });
  }
  return out;
}

/** Runs the collector on a replay file until it ends; resolves with its printed totals. */
export async function runCollector(
  env: Record<string, string>,
  file: string,
  onStart?: (collector: AppProcess) => void,
): Promise<{ published: number; failed: number; volume: number }> {
  const collector = new AppProcess('collector', 'collector', {
    ...env,
    COLLECTOR_REPLAY_FILE: file,
  });
  onStart?.(collector);
  const code = await collector.exited;
  const last = collector.output.trim().split('\n').pop() ?? '';
  if (code !== 0 || !last.startsWith('{'))
    throw new Error(`collector failed (${code}):\n${collector.output.slice(-3000)}`);
  return JSON.parse(last) as { published: number; failed: number; volume: number };
}

/** The first `prices` event of the ticks page's live feed (`/_/events`): latest price per symbol. */
export async function firstPrices(baseUrl: string): Promise<{ symbol: string; price: number }[]> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 30_000);
  try {
    const res = await fetch(`${baseUrl}/_/events`, { signal: abort.signal });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the feed ended before a prices event: ${text.slice(0, 500)}`);
      text += decoder.decode(value, { stream: true });
      for (const message of text.split('\n\n').slice(0, -1)) {
        const lines = message.split('\n');
        if (!lines.includes('event: prices')) continue;
        const data = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
        return (JSON.parse(data.join('\n')) as { prices: { symbol: string; price: number }[] })
          .prices;
      }
    }
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}
