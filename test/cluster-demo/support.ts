import { ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sleep } from '../support/wait';

const root = join(__dirname, '..', '..');

export type AppName = 'shortener' | 'ticks' | 'collector';

const SOURCES: Record<AppName, string> = {
  shortener: 'apps/demo-shortener/src/main.ts',
  ticks: 'apps/demo-ticks/src/main.ts',
  collector: 'apps/demo-ticks/src/collector.main.ts',
};

/**
 * One app as a child process, from its TypeScript sources (as the demo e2e test does: building
 * here would race the package test's build). Output is kept for failure messages.
 */
export class AppProcess {
  readonly child: ChildProcess;
  output = '';
  readonly exited: Promise<number | null>;

  constructor(
    readonly name: string,
    app: AppName,
    env: Record<string, string>,
    readonly url?: string,
  ) {
    this.child = spawn(
      process.execPath,
      ['-r', join(root, 'scripts', 'register-ts.js'), join(root, SOURCES[app])],
      {
        cwd: root,
        env: { ...process.env, NO_COLOR: '1', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.child.stdout!.on('data', (chunk) => (this.output += chunk));
    this.child.stderr!.on('data', (chunk) => (this.output += chunk));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves once `path` answers 200; fails with the process output if it exits or times out. */
  async ready(path: string, timeoutMs = 150_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`${this.name} exited:\n${this.output.slice(-3000)}`);
      try {
        const res = await fetch(`${this.url}${path}`, { signal: AbortSignal.timeout(2000) });
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline)
        throw new Error(`${this.name} not ready in ${timeoutMs} ms:\n${this.output.slice(-3000)}`);
      await sleep(250);
    }
  }

  /** The sum of a Prometheus metric's samples whose labels include `labels`. */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    return sumMetric(text, name, labels);
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<void> {
    if (!this.running) return;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Sums the samples of `name` (exactly that name) whose labels include `labels`. */
export function sumMetric(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have: Record<string, string> = {};
    for (const pair of (m[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)) have[pair[1]] = pair[2];
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[4]);
  }
  return sum;
}

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
