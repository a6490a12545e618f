import { Redis } from 'ioredis';
import { Candle, decodeCandle } from './candle';
import { APPLY_TICKS_LUA, REJECT_TICK_LUA } from './candle-scripts';
import { INTERVALS, IntervalName } from './interval';
import { Tick } from './tick';

export interface CandleStoreOptions {
  /** Prefix of every key of the store. */
  keyPrefix: string;
  /** The stream the ticks come from, and the consumer group (for the pending checks). */
  stream: string;
  group: string;
  /** Candles kept per symbol and interval; older ones are deleted (0 = keep all). */
  keep: number;
  /** Most ticks applied by one script call (a larger batch is split). */
  maxBatch: number;
}

/** A tick the apply script refused: it would make this candle's volume infinite. */
export interface VolumeOverflow {
  interval: string;
  /** The candle's start (ms since the epoch). */
  start: number;
  /** The candle's volume before this tick (stored, plus the ticks of its batch applied before it). */
  volume: number;
}

export type ApplyResult = 'applied' | 'duplicate' | VolumeOverflow;

export interface LatestPrice {
  symbol: string;
  price: number;
  ts: number;
}

/** A tick of a stream entry, with the entry's idempotency record. */
export interface TickEntry {
  id: string;
  tick: Tick;
  record: string;
}

/** The transport's in-progress token of the batch and how long done marks live. */
export interface DoneMark {
  token: string;
  ttlMs: number;
}

type ScriptedRedis = Redis & {
  ticksApply(...args: (string | number)[]): Promise<(number | string)[]>;
  ticksReject(...args: (string | number)[]): Promise<number>;
};

const INTERVAL_SPEC = Object.entries(INTERVALS)
  .map(([name, ms]) => `${name}:${ms}`)
  .join(',');

/**
 * Candles in Redis. A batch of ticks is applied by one Lua script that, atomically, marks each
 * tick's idempotency record done and folds the tick into the 1m/5m/30m candles and the latest
 * price: a tick whose record is already done (a redelivery after a lost XACK or a crash) changes
 * nothing.
 */
export class CandleStore {
  private readonly redis: ScriptedRedis;

  constructor(
    redis: Redis,
    readonly options: CandleStoreOptions,
  ) {
    redis.defineCommand('ticksApply', { lua: APPLY_TICKS_LUA });
    redis.defineCommand('ticksReject', { numberOfKeys: 2, lua: REJECT_TICK_LUA });
    this.redis = redis as ScriptedRedis;
  }

  key(name: string): string {
    return this.options.keyPrefix + name;
  }

  /**
   * Applies each tick once; resolves with what happened to each, in order. A tick that would make
   * a candle's volume infinite is refused (its record is left to `reject`).
   */
  async apply(entries: readonly TickEntry[], mark: DoneMark): Promise<ApplyResult[]> {
    const chunks: TickEntry[][] = [];
    for (let i = 0; i < entries.length; i += this.options.maxBatch)
      chunks.push(entries.slice(i, i + this.options.maxBatch));
    const results = await Promise.all(chunks.map((chunk) => this.applyChunk(chunk, mark)));
    return results.flat();
  }

  private async applyChunk(entries: readonly TickEntry[], mark: DoneMark): Promise<ApplyResult[]> {
    const args: (string | number)[] = [
      2 + entries.length,
      this.key('symbols'),
      this.options.stream,
    ];
    for (const e of entries) args.push(e.record);
    args.push(
      this.options.keyPrefix,
      this.options.keep,
      INTERVAL_SPEC,
      this.options.group,
      mark.token,
      mark.ttlMs,
    );
    for (const { id, tick } of entries)
      args.push(id, tick.symbol, String(tick.price), String(tick.qty), String(tick.ts));
    const results = await this.redis.ticksApply(...args);
    return results.map((r): ApplyResult => {
      if (typeof r === 'string') {
        const [interval, start, volume] = r.split(':');
        return { interval, start: Number(start), volume: Number(volume) };
      }
      return r === 1 ? 'applied' : 'duplicate';
    });
  }

  /**
   * Dead-letters an invalid tick: adds an entry to `deadLetterStream` and marks its record done, in
   * one step (a redelivery adds no second dead-letter entry). Resolves with false when it was
   * already dead-lettered.
   */
  async reject(
    record: string,
    mark: DoneMark,
    deadLetterStream: string,
    fields: Record<string, string>,
  ): Promise<boolean> {
    const flat = Object.entries(fields).flat();
    return (
      (await this.redis.ticksReject(record, deadLetterStream, mark.token, mark.ttlMs, ...flat)) ===
      1
    );
  }

  async symbols(): Promise<string[]> {
    return (await this.redis.smembers(this.key('symbols'))).sort();
  }

  async latest(symbol: string): Promise<LatestPrice | undefined> {
    const [p, ts] = await this.redis.hmget(this.key(`last:${symbol}`), 'p', 'ts');
    if (p === null || ts === null) return undefined;
    return { symbol, price: Number(p), ts: Number(ts) };
  }

  /** The latest price of each of `symbols` that has one, in the order given (one round trip). */
  async latestMany(symbols: readonly string[]): Promise<LatestPrice[]> {
    if (symbols.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const symbol of symbols) pipeline.hmget(this.key(`last:${symbol}`), 'p', 'ts');
    const replies = (await pipeline.exec()) ?? [];
    const out: LatestPrice[] = [];
    replies.forEach(([err, reply], i) => {
      if (err) throw err;
      const [p, ts] = reply as (string | null)[];
      if (p !== null && ts !== null)
        out.push({ symbol: symbols[i], price: Number(p), ts: Number(ts) });
    });
    return out;
  }

  /** The last `limit` candles of `symbol` (oldest first), or undefined for an unknown symbol. */
  async candles(
    symbol: string,
    interval: IntervalName,
    limit: number,
  ): Promise<Candle[] | undefined> {
    const latest = await this.latest(symbol);
    if (!latest) return undefined;
    const starts = await this.redis.zrange(
      this.key(`index:${interval}:${symbol}`),
      String(-limit),
      '-1',
    );
    if (starts.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const start of starts) pipeline.hgetall(this.key(`candle:${interval}:${symbol}:${start}`));
    const replies = (await pipeline.exec()) ?? [];
    const candles: Candle[] = [];
    replies.forEach(([err, hash], i) => {
      if (err) throw err;
      const candle = decodeCandle(
        hash as Record<string, string>,
        Number(starts[i]),
        interval,
        latest.ts,
      );
      if (candle) candles.push(candle);
    });
    return candles;
  }
}
