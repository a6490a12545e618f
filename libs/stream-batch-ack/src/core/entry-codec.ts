/** The field in which ClientRedisStreams writes the JSON payload of a message. */
export const DATA_FIELD = 'data';

export type DecodedEntry =
  | { ok: true; payload: unknown; fields: Record<string, string> }
  | { ok: false; error: string; fields: Record<string, string> };

/** Turns the flat `[field, value, ...]` array of a stream entry into an object (a later duplicate field wins). */
export function fieldsToObject(flat: readonly string[] | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!flat) return out;
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]] = flat[i + 1];
  return out;
}

/**
 * Decodes a stream entry. An entry whose only field is `data` was written by ClientRedisStreams
 * (or in its format): its value is parsed as JSON, and a parse failure makes the entry malformed.
 * Any other entry (other producers, `redis-cli XADD s * symbol BTC price 1`) is delivered as the
 * plain object of its fields, values as strings.
 */
export function decodeEntry(flat: readonly string[] | null | undefined): DecodedEntry {
  const fields = fieldsToObject(flat);
  const names = Object.keys(fields);
  if (names.length === 1 && names[0] === DATA_FIELD) {
    try {
      return { ok: true, payload: JSON.parse(fields[DATA_FIELD]), fields };
    } catch (err) {
      return { ok: false, error: err instanceof Error ? err.message : String(err), fields };
    }
  }
  return { ok: true, payload: fields, fields };
}

/** Encodes a payload the way ClientRedisStreams writes it. `undefined` is written as JSON `null`. */
export function encodePayload(payload: unknown): string[] {
  const json = JSON.stringify(payload);
  return [DATA_FIELD, json === undefined ? 'null' : json];
}

/** Compares two stream ids (`ms-seq`). */
export function compareStreamIds(a: string, b: string): number {
  const [am, as = '0'] = a.split('-');
  const [bm, bs = '0'] = b.split('-');
  const ms = BigInt(am) - BigInt(bm);
  if (ms !== 0n) return ms < 0n ? -1 : 1;
  const seq = BigInt(as) - BigInt(bs);
  return seq === 0n ? 0 : seq < 0n ? -1 : 1;
}
