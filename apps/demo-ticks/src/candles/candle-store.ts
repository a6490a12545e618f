import type { TicksRedis } from '../redis/redis-connection';
import { hashTag } from '../redis/redis-keys';
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
  /**
   * The physical streams the ticks come from (partitions of `stream`) and the one a symbol's ticks
   * go to. Default: `stream` alone.
   */
  placement?: TickPlacement;
}

/** Which stream carries which symbol: the candle keys of a symbol live in that stream's hash slot. */
export interface TickPlacement {
  streams: readonly string[];
  streamOf(symbol: string): string;
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

type ScriptedRedis = TicksRedis & {
  ticksApply(...args: (string | number)[]): Promise<(number | string)[]>;
  ticksReject(...args: (string | number)[]): Promise<number>;
};

const INTERVAL_SPEC = Object.entries(INTERVALS)
  .map(([name, ms]) => `${name}:${ms}`)
  .join(',');

/**
 * The prefix of the keys of the symbols whose ticks come from `stream`: `<prefix>{<tag>}:` when the
 * stream has a hash tag (a partition `ticks:{3}`, or `{ticks}` on a Cluster), so that the candle
 * script finds the stream, its idempotency records and the candles in one slot; else `<prefix>`.
 */
export function scopedPrefix(prefix: string, stream: string): string {
  const tag = hashTag(stream);
  return tag === undefined ? prefix : `${prefix}{${tag}}:`;
}

/**
 * Candles in Redis. A batch of ticks is applied by one Lua script that, atomically, marks each
 * tick's idempotency record done and folds the tick into the 1m/5m/30m candles and the latest
 * price: a tick whose record is already done (a redelivery after a lost XACK or a crash) changes
 * nothing.
 */
export class CandleStore {
  private readonly redis: ScriptedRedis;
  private readonly placement: TickPlacement;

  constructor(
    redis: TicksRedis,
    readonly options: CandleStoreOptions,
  ) {
    this.placement = options.placement ?? {
      streams: [options.stream],
      streamOf: () => options.stream,
    };
    redis.defineCommand('ticksApply', { lua: APPLY_TICKS_LUA });
    redis.defineCommand('ticksReject', { numberOfKeys: 2, lua: REJECT_TICK_LUA });
    this.redis = redis as ScriptedRedis;
  }

  /** A key of the symbols whose ticks come from `stream` (default: the configured stream). */
  key(name: string, stream = this.options.stream): string {
    return scopedPrefix(this.options.keyPrefix, stream) + name;
  }

  /** A key of `symbol`'s data (in the slot of the stream carrying it). */
  private symbolKey(symbol: string, name: string): string {
    return this.key(name, this.placement.streamOf(symbol));
  }

  /**
   * Applies each tick once; resolves with what happened to each, in order. A tick that would make
   * a candle's volume infinite is refused (its record is left to `reject`).
   */
  async apply(
    entries: readonly TickEntry[],
    mark: DoneMark,
    /** The (physical) stream the entries come from: a partition of a partitioned stream. */
    stream = this.options.stream,
  ): Promise<ApplyResult[]> {
    const chunks: TickEntry[][] = [];
    for (let i = 0; i < entries.length; i += this.options.maxBatch)
      chunks.push(entries.slice(i, i + this.options.maxBatch));
    const results = await Promise.all(chunks.map((chunk) => this.applyChunk(chunk, mark, stream)));
    return results.flat();
  }

  private async applyChunk(
    entries: readonly TickEntry[],
    mark: DoneMark,
    stream: string,
  ): Promise<ApplyResult[]> {
    const args: (string | number)[] = [2 + entries.length, this.key('symbols', stream), stream];
    for (const e of entries) args.push(e.record);
    args.push(
      scopedPrefix(this.options.keyPrefix, stream),
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
    fields: readonly string[],
  ): Promise<boolean> {
    return (
      (await this.redis.ticksReject(
        record,
        deadLetterStream,
        mark.token,
        mark.ttlMs,
        ...fields,
      )) === 1
    );
  }

  /** Every symbol seen, sorted (one SMEMBERS per stream: each stream's set is in its slot). */
  async symbols(): Promise<string[]> {
    const sets = await Promise.all(
      this.placement.streams.map((stream) => this.redis.smembers(this.key('symbols', stream))),
    );
    return [...new Set(sets.flat())].sort();
  }

  async latest(symbol: string): Promise<LatestPrice | undefined> {
    const [p, ts] = await this.redis.hmget(this.symbolKey(symbol, `last:${symbol}`), 'p', 'ts');
    if (p === null || ts === null) return undefined;
    return { symbol, price: Number(p), ts: Number(ts) };
  }

  /** The latest price of each of `symbols` that has one, in the order given (one round trip per stream). */
  async latestMany(symbols: readonly string[]): Promise<LatestPrice[]> {
    if (symbols.length === 0) return [];
    // One pipeline per stream: a symbol's keys are in its stream's slot (one per Cluster slot).
    const byStream = new Map<string, string[]>();
    for (const symbol of symbols) {
      const stream = this.placement.streamOf(symbol);
      const names = byStream.get(stream);
      if (names) names.push(symbol);
      else byStream.set(stream, [symbol]);
    }
    const found = new Map<string, LatestPrice>();
    await Promise.all(
      [...byStream].map(async ([stream, names]) => {
        const pipeline = this.redis.pipeline();
        for (const symbol of names) pipeline.hmget(this.key(`last:${symbol}`, stream), 'p', 'ts');
        const replies = (await pipeline.exec()) ?? [];
        replies.forEach(([err, reply], i) => {
          if (err) throw err;
          const [p, ts] = reply as (string | null)[];
          if (p !== null && ts !== null)
            found.set(names[i], { symbol: names[i], price: Number(p), ts: Number(ts) });
        });
      }),
    );
    return symbols.flatMap((symbol) => found.get(symbol) ?? []);
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
      this.symbolKey(symbol, `index:${interval}:${symbol}`),
      String(-limit),
      '-1',
    );
    if (starts.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const start of starts)
      pipeline.hgetall(this.symbolKey(symbol, `candle:${interval}:${symbol}:${start}`));
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
