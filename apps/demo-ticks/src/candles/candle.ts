import { INTERVALS, IntervalName } from './interval';

/** One OHLCV candle as the HTTP API returns it. */
export interface Candle {
  /** ms since the epoch; the candle covers [start, end). */
  start: number;
  end: number;
  open: number;
  high: number;
  low: number;
  close: number;
  /** Sum of the ticks' qty. */
  volume: number;
  /** Number of ticks. */
  trades: number;
  /** True when a tick of the symbol at or after `end` was seen (the candle will not normally change again). */
  closed: boolean;
}

/** The fields of a candle hash in Redis (written by the apply script). */
export type CandleHash = Record<string, string>;

/** Turns a candle hash into a Candle; undefined when the hash is empty or incomplete. */
export function decodeCandle(
  hash: CandleHash,
  start: number,
  interval: IntervalName,
  latestTs: number | undefined,
): Candle | undefined {
  const fields = ['o', 'h', 'l', 'c', 'v', 'n'];
  if (fields.some((f) => hash[f] === undefined)) return undefined;
  const end = start + INTERVALS[interval];
  return {
    start,
    end,
    open: Number(hash.o),
    high: Number(hash.h),
    low: Number(hash.l),
    close: Number(hash.c),
    volume: Number(hash.v),
    trades: Number(hash.n),
    closed: latestTs !== undefined && latestTs >= end,
  };
}

/** Orders stream entry ids (`<ms>-<seq>`) numerically. */
export function compareEntryIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(Number);
  const [bm, bs] = b.split('-').map(Number);
  return am !== bm ? am - bm : (as ?? 0) - (bs ?? 0);
}

/** The ms part of a stream entry id (the time Redis added it). */
export function entryIdTime(id: string): number {
  return Number(id.split('-', 1)[0]);
}
