/** Candle intervals: name -> length in ms. A candle covers [start, start + length). */
export const INTERVALS = {
  '1m': 60_000,
  '5m': 300_000,
  '30m': 1_800_000,
} as const;

export type IntervalName = keyof typeof INTERVALS;

export const INTERVAL_NAMES = Object.keys(INTERVALS) as IntervalName[];

export function isIntervalName(value: unknown): value is IntervalName {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(INTERVALS, value);
}

/** Start (ms since the epoch) of the `interval` candle that contains `ts`. */
export function bucketStart(ts: number, interval: IntervalName): number {
  const length = INTERVALS[interval];
  return ts - (((ts % length) + length) % length);
}
