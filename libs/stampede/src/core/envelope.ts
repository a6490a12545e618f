/** What is stored for one cache entry: the value, how long its load took, and when it expires. */
export interface Envelope<T = unknown> {
  v: T;
  /** Load time of the value in ms (XFetch's delta). */
  d: number;
  /** Expiry as epoch ms, as seen by the writer. */
  e: number;
}

export function encodeEnvelope(envelope: Envelope): string {
  return JSON.stringify(envelope);
}

/** Returns undefined for anything that is not an envelope (a foreign or corrupt value is a miss). */
export function decodeEnvelope<T = unknown>(
  raw: string | null | undefined,
): Envelope<T> | undefined {
  if (raw === null || raw === undefined) return undefined;
  try {
    const parsed = JSON.parse(raw) as Envelope<T>;
    if (parsed && typeof parsed === 'object' && 'v' in parsed && typeof parsed.e === 'number') {
      return { v: parsed.v, d: typeof parsed.d === 'number' ? parsed.d : 0, e: parsed.e };
    }
  } catch {
    // not JSON: treated as a miss and overwritten by the next load
  }
  return undefined;
}

/** True when both describe the same stored entry (same write): expiry and load time match. */
export function sameEnvelope(a: Envelope | undefined, b: Envelope): boolean {
  return a !== undefined && a.e === b.e && a.d === b.d;
}
