/**
 * The consumer figures of the page's stats panel. Counters are sampled once a second; rates are
 * the difference between two samples over the time between them.
 */

/** Cumulative counters at one moment. */
export interface ConsumerSample {
  /** ms since the epoch */
  at: number;
  /** ticks_handled_total (the app's counter): ticks folded into candles. */
  handled: number;
  /** `server.metrics().xackCalls`: XACK commands that succeeded. */
  xacks: number;
  /** `server.metrics().xackIds`: ids acknowledged by those XACKs. */
  ackedIds: number;
}

export interface ConsumerRates {
  /** Ticks folded into candles per second; null without an earlier sample. */
  ticksPerSec: number | null;
  /** XACK commands per second; null without an earlier sample. */
  xacksPerSec: number | null;
  /** Ids per XACK over the period; null when no XACK was sent in it. */
  idsPerXack: number | null;
}

/** What one `stats` event of the page carries. */
export interface ConsumerStats extends ConsumerRates {
  at: number;
  handledTotal: number;
  xackTotal: number;
  /** From XINFO GROUPS, as /health reads it: entries not yet read by the group, and read but not acknowledged. */
  lag: number | null;
  pending: number | null;
  /** Handled ids waiting for their batched XACK, and entries being handled now. */
  ackQueue: number;
  inFlight: number;
  /** Why lag and pending are missing (Redis did not answer, no group yet). */
  problem?: string;
}

/**
 * Rates between two samples. A previous sample older than `maxAgeMs` (nobody watched for a while)
 * gives no rate rather than an average over a long gap.
 */
export function consumerRates(
  previous: ConsumerSample | undefined,
  current: ConsumerSample,
  maxAgeMs = 5000,
): ConsumerRates {
  const seconds = previous ? (current.at - previous.at) / 1000 : 0;
  if (!previous || seconds <= 0 || seconds * 1000 > maxAgeMs)
    return { ticksPerSec: null, xacksPerSec: null, idsPerXack: null };
  const xacks = current.xacks - previous.xacks;
  return {
    ticksPerSec: Math.max(0, current.handled - previous.handled) / seconds,
    xacksPerSec: Math.max(0, xacks) / seconds,
    idsPerXack: xacks > 0 ? (current.ackedIds - previous.ackedIds) / xacks : null,
  };
}
