import type { Envelope, EnvelopeCodec } from '../core/envelope';

/**
 * A miss takes its lock in the value key itself: `SET value <VALUE_LOCK><token> NX PX`. Readers
 * see no value (a miss), the holder's fill replaces the mark with the value in one `SET ... GET`,
 * and a caller that missed just before the fill finds the key taken instead of locking it. The
 * mark starts with a NUL, which no envelope text does. Refreshes of a value that is still served
 * lock a separate key instead (see keys.ts), since the value must stay readable meanwhile.
 */
export const VALUE_LOCK = '\u0000lock:';

/** The same prefix in a Lua string. */
export const VALUE_LOCK_LUA = '\\0lock:';

/** Appended to a lock mark by a waiting instance: the fill then publishes a notification. */
export const WAITING = '|w';

export function valueLockOf(token: string): string {
  return VALUE_LOCK + token;
}

export function isValueLock(text: string | null | undefined): boolean {
  return typeof text === 'string' && text.startsWith(VALUE_LOCK);
}

/** A stored text decoded: a lock mark, like a foreign or corrupt text, is no value (a miss). */
export function decodeStored<T>(
  codec: EnvelopeCodec,
  raw: string | null | undefined,
): Envelope<T> | undefined {
  if (raw === null || raw === undefined || raw.startsWith(VALUE_LOCK)) return undefined;
  return codec.decode<T>(raw);
}
