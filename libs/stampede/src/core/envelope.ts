/** What is stored for one cache entry: the value, how long its load took, and when it expires. */
export interface Envelope<T = unknown> {
  v: T;
  /** Load time of the value in ms (XFetch's delta). */
  d: number;
  /** Expiry as epoch ms, as seen by the writer; with grace, the value is kept (stale) past it. */
  e: number;
  /** Versions of the value's tags when its load started (see tag-versions.ts). */
  t?: Record<string, number>;
  /**
   * Grace of the value in ms, when it has one: how long past `e` it is kept and served stale.
   * Readers use it rather than their own policy's grace (a loader or `set` may choose it).
   */
  g?: number;
}

/** Turns values into text and back. The default is JSON; pass one that round-trips Date, Map, BigInt... */
export interface StampedeSerializer {
  serialize(value: unknown): string;
  deserialize(text: string): unknown;
}

export const jsonSerializer: StampedeSerializer = {
  serialize: (value) => JSON.stringify(value),
  deserialize: (text) => JSON.parse(text) as unknown,
};

/** Where a decoded envelope keeps the length of its text: a symbol, which serializers skip. */
const ENCODED_SIZE = Symbol('stampede.encodedSize');
type Sized = { [ENCODED_SIZE]?: number };

/** The length of the text `envelope` was decoded from (about its bytes), if it was decoded. */
export function encodedSize(envelope: Envelope): number | undefined {
  return (envelope as Sized)[ENCODED_SIZE];
}

/** Encodes envelopes with a serializer; a foreign or corrupt text decodes to undefined (a miss). */
export class EnvelopeCodec {
  constructor(private readonly serializer: StampedeSerializer = jsonSerializer) {}

  encode(envelope: Envelope): string {
    return this.serializer.serialize(envelope);
  }

  /** The text of a value alone (what the in-process tier keeps). */
  encodeValue(value: unknown): string {
    return this.serializer.serialize(value);
  }

  /** A value's text decoded; throws what the serializer throws. */
  decodeValue<T = unknown>(text: string): T {
    return this.serializer.deserialize(text) as T;
  }

  decode<T = unknown>(raw: string | null | undefined): Envelope<T> | undefined {
    if (raw === null || raw === undefined) return undefined;
    let parsed: Envelope<T>;
    try {
      parsed = this.serializer.deserialize(raw) as Envelope<T>;
    } catch {
      return undefined; // not ours: treated as a miss and overwritten by the next load
    }
    if (!parsed || typeof parsed !== 'object' || !('v' in parsed) || typeof parsed.e !== 'number')
      return undefined;
    const envelope: Envelope<T> = {
      v: parsed.v,
      d: typeof parsed.d === 'number' ? parsed.d : 0,
      e: parsed.e,
    };
    if (parsed.t && typeof parsed.t === 'object') envelope.t = parsed.t;
    if (typeof parsed.g === 'number' && parsed.g > 0) envelope.g = parsed.g;
    (envelope as Sized)[ENCODED_SIZE] = raw.length;
    return envelope;
  }
}

export const defaultCodec = new EnvelopeCodec();

export function encodeEnvelope(envelope: Envelope): string {
  return defaultCodec.encode(envelope);
}

/** Returns undefined for anything that is not an envelope (a foreign or corrupt value is a miss). */
export function decodeEnvelope<T = unknown>(
  raw: string | null | undefined,
): Envelope<T> | undefined {
  return defaultCodec.decode<T>(raw);
}

/** How long past its expiry `envelope` is kept and served stale: its own grace, else `policyGrace`. */
export function graceOf(envelope: Envelope, policyGrace: number): number {
  return envelope.g ?? policyGrace;
}

/** True when both describe the same stored entry (same write): expiry and load time match. */
export function sameEnvelope(a: Envelope | undefined, b: Envelope): boolean {
  return a !== undefined && a.e === b.e && a.d === b.d;
}
