import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { Candle, decodeCandle } from './candle';
import { APPLY_TICKS_LUA, PRUNE_APPLIED_LUA, REJECT_TICK_LUA } from './candle-scripts';
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
  /** Most ticks applied by one script call. */
  maxBatch: number;
}

export type ApplyResult = 'applied' | 'duplicate';

export interface LatestPrice {
  symbol: string;
  price: number;
  ts: number;
}

interface Queued {
  id: string;
  tick: Tick;
  resolve: (r: ApplyResult) => void;
  reject: (e: unknown) => void;
}

type ScriptedRedis = Redis & {
  ticksApply(...args: (string | number)[]): Promise<number[]>;
  ticksReject(...args: string[]): Promise<number>;
  ticksPrune(...args: string[]): Promise<number>;
};

const INTERVAL_SPEC = Object.entries(INTERVALS)
  .map(([name, ms]) => `${name}:${ms}`)
  .join(',');

/**
 * Candles in Redis. Every tick is applied by one Lua script that, atomically, records its entry id
 * in the applied set and folds it into the 1m/5m/30m candles and the latest price: a tick whose id
 * is already there (a redelivery after a lost XACK or a crash) changes nothing. Ticks handed in
 * during the same event-loop turn go out as one script call.
 */
export class CandleStore {
  private readonly logger = new Logger(CandleStore.name);
  private readonly redis: ScriptedRedis;
  private queue: Queued[] = [];
  private scheduled = false;
  private readonly flushing = new Set<Promise<void>>();

  constructor(
    redis: Redis,
    readonly options: CandleStoreOptions,
  ) {
    redis.defineCommand('ticksApply', { numberOfKeys: 3, lua: APPLY_TICKS_LUA });
    redis.defineCommand('ticksReject', { numberOfKeys: 2, lua: REJECT_TICK_LUA });
    redis.defineCommand('ticksPrune', { numberOfKeys: 2, lua: PRUNE_APPLIED_LUA });
    this.redis = redis as ScriptedRedis;
  }

  key(name: string): string {
    return this.options.keyPrefix + name;
  }

  /** Applies the tick of stream entry `id` once; resolves when it is stored in Redis. */
  apply(id: string, tick: Tick): Promise<ApplyResult> {
    return new Promise<ApplyResult>((resolve, reject) => {
      this.queue.push({ id, tick, resolve, reject });
      if (this.queue.length >= this.options.maxBatch) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    const args: (string | number)[] = [
      this.key('applied'),
      this.key('symbols'),
      this.options.stream,
      this.options.keyPrefix,
      this.options.keep,
      INTERVAL_SPEC,
      this.options.group,
    ];
    for (const { id, tick } of batch)
      args.push(id, tick.symbol, String(tick.price), String(tick.qty), String(tick.ts));
    const run = this.redis.ticksApply(...args).then(
      (results) =>
        batch.forEach((q, i) => q.resolve(Number(results[i]) === 1 ? 'applied' : 'duplicate')),
      (err) => batch.forEach((q) => q.reject(err)),
    );
    const tracked = run.finally(() => this.flushing.delete(tracked));
    this.flushing.add(tracked);
  }

  /**
   * Dead-letters an invalid tick: adds an entry to `deadLetterStream` and records the entry id as
   * applied, in one step (a redelivery adds no second dead-letter entry). Resolves with false when
   * it was already dead-lettered.
   */
  async reject(
    id: string,
    deadLetterStream: string,
    fields: Record<string, string>,
  ): Promise<boolean> {
    const flat = Object.entries(fields).flat();
    return (await this.redis.ticksReject(this.key('applied'), deadLetterStream, id, ...flat)) === 1;
  }

  /** Forgets applied ids that cannot be delivered again. Returns how many were removed. */
  async prune(): Promise<number> {
    return Number(
      await this.redis.ticksPrune(this.options.stream, this.key('applied'), this.options.group),
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

  /** Ticks queued or being written. */
  get queued(): number {
    return this.queue.length;
  }

  /** Waits for every queued tick to be written (or to fail). */
  async drain(): Promise<void> {
    this.flush();
    while (this.flushing.size > 0) await Promise.allSettled([...this.flushing]);
  }

  /** How many applied ids are remembered now (for metrics and tests). */
  async appliedCount(): Promise<number> {
    return this.redis.zcard(this.key('applied'));
  }

  /** Logs instead of throwing: used by timers. */
  async pruneQuietly(): Promise<void> {
    try {
      await this.prune();
    } catch (err) {
      this.logger.warn(`Pruning applied ids failed: ${(err as Error).message}`);
    }
  }
}
