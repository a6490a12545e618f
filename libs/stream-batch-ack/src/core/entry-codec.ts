/** The field in which ClientRedisStreams writes the JSON payload of a message. */
export const DATA_FIELD = 'data';
/** Optional field: a JSON object of string headers (e.g. a W3C `traceparent`). */
export const HEADERS_FIELD = 'headers';
/** Fields of a request (`send()`): its correlation id and the stream that takes the reply. */
export const REQUEST_ID_FIELD = 'id';
export const REPLY_TO_FIELD = 'replyTo';

export type Headers = Readonly<Record<string, string>>;

/** Default namespace of reply streams (the `replyPrefix` option of the client and the server). */
export const DEFAULT_REPLY_PREFIX = 'sba:reply:';
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The reply stream of one client: `<prefix>{<uuid v4>}`, the uuid being its Cluster hash tag. */
export function replyStreamName(prefix: string, uuid: string): string {
  return `${prefix}{${uuid}}`;
}

/**
 * Why a server must not reply into `replyTo`, or `undefined` when it is a reply stream name of
 * the namespace `prefix` (exactly `<prefix>{<uuid v4>}`, as ClientRedisStreams names them).
 */
export function replyToRefusal(replyTo: string, prefix: string): string | undefined {
  const tag = replyTo.startsWith(prefix) ? replyTo.slice(prefix.length) : '';
  if (tag.startsWith('{') && tag.endsWith('}') && UUID_V4.test(tag.slice(1, -1))) return undefined;
  const shown = replyTo.length > 200 ? `${replyTo.slice(0, 200)}...` : replyTo;
  return (
    `"replyTo" (${JSON.stringify(shown)}) is not a reply stream: this server replies only into ` +
    `${JSON.stringify(replyStreamName(prefix, '<uuid v4>'))} (its replyPrefix ${JSON.stringify(prefix)}); ` +
    'a client with another replyPrefix needs the same one on the server'
  );
}

export interface DecodeOptions {
  /** Requests are valid only with a `replyTo` in this namespace (see `replyToRefusal`). */
  replyPrefix?: string;
}

export interface RequestInfo {
  id: string;
  replyTo: string;
}

export type DecodedEntry =
  | {
      ok: true;
      payload: unknown;
      fields: Record<string, string>;
      headers: Headers;
      request?: RequestInfo;
    }
  | { ok: false; error: string; fields: Record<string, string>; headers: Headers };

const NO_HEADERS: Headers = Object.freeze({});
const OWN_FIELDS = new Set([DATA_FIELD, HEADERS_FIELD, REQUEST_ID_FIELD, REPLY_TO_FIELD]);

/** Turns the flat `[field, value, ...]` array of a stream entry into an object (a later duplicate field wins). */
export function fieldsToObject(flat: readonly string[] | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!flat) return out;
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]] = flat[i + 1];
  return out;
}

/**
 * Decodes a stream entry. An entry with a `data` field and otherwise only `headers`, `id` and
 * `replyTo` was written by ClientRedisStreams (or in its format): `data` is parsed as JSON and
 * `headers` as a JSON object of strings; a parse failure makes the entry malformed. Any other
 * entry (other producers, `redis-cli XADD s * symbol BTC price 1`) is delivered as the plain
 * object of its fields, values as strings. With `replyPrefix`, a request whose `replyTo` is not a
 * reply stream of that namespace is malformed.
 */
export function decodeEntry(
  flat: readonly string[] | null | undefined,
  options: DecodeOptions = {},
): DecodedEntry {
  // The common entry, ClientRedisStreams' `data` alone: no field checks.
  if (flat?.length === 2 && flat[0] === DATA_FIELD) {
    const fields: Record<string, string> = { [DATA_FIELD]: flat[1] };
    try {
      return { ok: true, payload: JSON.parse(flat[1]), fields, headers: NO_HEADERS };
    } catch (err) {
      const detail = err instanceof Error ? err.message : String(err);
      return {
        ok: false,
        error: `"data" is not valid JSON (${detail})`,
        fields,
        headers: NO_HEADERS,
      };
    }
  }
  const fields = fieldsToObject(flat);
  if (fields[DATA_FIELD] === undefined || !Object.keys(fields).every((f) => OWN_FIELDS.has(f)))
    return { ok: true, payload: fields, fields, headers: NO_HEADERS };
  let headers = NO_HEADERS;
  if (fields[HEADERS_FIELD] !== undefined) {
    const parsed = parseHeaders(fields[HEADERS_FIELD]);
    if (typeof parsed === 'string') return { ok: false, error: parsed, fields, headers };
    headers = parsed;
  }
  let payload: unknown;
  try {
    payload = JSON.parse(fields[DATA_FIELD]);
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    return { ok: false, error: `"data" is not valid JSON (${detail})`, fields, headers };
  }
  const id = fields[REQUEST_ID_FIELD];
  const replyTo = fields[REPLY_TO_FIELD];
  if ((id === undefined) !== (replyTo === undefined))
    return { ok: false, error: 'a request needs both "id" and "replyTo"', fields, headers };
  const refusal =
    replyTo !== undefined && options.replyPrefix !== undefined
      ? replyToRefusal(replyTo, options.replyPrefix)
      : undefined;
  if (refusal) return { ok: false, error: refusal, fields, headers };
  return id === undefined
    ? { ok: true, payload, fields, headers }
    : { ok: true, payload, fields, headers, request: { id, replyTo } };
}

function parseHeaders(json: string): Headers | string {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    return `"headers" is not valid JSON (${err instanceof Error ? err.message : String(err)})`;
  }
  if (!value || typeof value !== 'object' || Array.isArray(value))
    return '"headers" must be a JSON object';
  for (const v of Object.values(value))
    if (typeof v !== 'string') return '"headers" values must be strings';
  return value as Headers;
}

/**
 * Encodes a message the way ClientRedisStreams writes it. `undefined` is written as JSON `null`;
 * empty headers are left out.
 */
export function encodePayload(
  payload: unknown,
  headers?: Headers,
  request?: RequestInfo,
): string[] {
  const json = JSON.stringify(payload);
  const out = [DATA_FIELD, json === undefined ? 'null' : json];
  if (headers && Object.keys(headers).length > 0) out.push(HEADERS_FIELD, JSON.stringify(headers));
  if (request) out.push(REQUEST_ID_FIELD, request.id, REPLY_TO_FIELD, request.replyTo);
  return out;
}

/**
 * The headers written for a message: the packet's metadata (NestJS 12: what a dispatch hook set
 * with `client.setOnDispatchHook()`), then the record's headers, which win over metadata of the
 * same name. Metadata entries whose value is `undefined` are left out; any other value that is
 * not a string throws (the consumer would refuse the entry's headers). Returns `headers` itself
 * when there is no metadata.
 */
export function mergeMetadata(metadata: unknown, headers?: Headers): Headers | undefined {
  if (metadata === undefined || metadata === null) return headers;
  if (typeof metadata !== 'object' || Array.isArray(metadata))
    throw new TypeError(`Packet metadata must be an object of strings, got ${typeof metadata}`);
  let out: Record<string, string> | undefined;
  for (const [name, value] of Object.entries(metadata)) {
    if (value === undefined) continue;
    if (typeof value !== 'string')
      throw new TypeError(
        `Packet metadata "${name}" must be a string, got ${value === null ? 'null' : typeof value}`,
      );
    (out ??= {})[name] = value;
  }
  if (!out) return headers;
  return headers ? { ...out, ...headers } : out;
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

/**
 * The header in which ClientRedisStreams writes the partition key of a message to a partitioned
 * stream; the consumer keeps the order of each key by it (`ordering: 'key'`).
 */
export const PARTITION_KEY_HEADER = 'sba-partition-key';

/**
 * The partition key of a raw entry (`[field, value, ...]`): its `sba-partition-key` header, or
 * undefined (no key, or headers that do not parse: such an entry is dead-lettered anyway).
 */
export function partitionKeyOfFields(flat: readonly string[]): string | undefined {
  for (let i = 0; i + 1 < flat.length; i += 2) {
    if (flat[i] !== HEADERS_FIELD) continue;
    const headers = parseHeaders(flat[i + 1]);
    return typeof headers === 'string' ? undefined : headers[PARTITION_KEY_HEADER];
  }
  return undefined;
}
