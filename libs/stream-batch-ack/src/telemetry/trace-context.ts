/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) in a message's headers: the producer
 * writes `traceparent` (and `tracestate`), the consumer reads them back. Pure string work, written
 * here rather than through the global propagator so that it works whatever propagator the app
 * registered (or none).
 */

export const TRACEPARENT = 'traceparent';
export const TRACESTATE = 'tracestate';

export interface TraceParent {
  traceId: string;
  spanId: string;
  traceFlags: number;
}

const TRACEPARENT_RE = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ALL_ZEROS = /^0+$/;

/** `00-<trace id>-<span id>-<flags>`. */
export function formatTraceparent(traceId: string, spanId: string, traceFlags: number): string {
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * Parses a `traceparent` header; undefined when it is missing or invalid. Version 00 must have
 * exactly four parts; a later version may carry more (they are ignored), as the spec asks.
 */
export function parseTraceparent(value: string | undefined): TraceParent | undefined {
  if (value === undefined) return undefined;
  const m = TRACEPARENT_RE.exec(value.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (ALL_ZEROS.test(traceId) || ALL_ZEROS.test(spanId)) return undefined;
  return { traceId, spanId, traceFlags: parseInt(flags, 16) };
}
