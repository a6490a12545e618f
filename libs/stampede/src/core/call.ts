import type { EnvelopeCodec, Envelope } from './envelope';
import { StampedeSerializationError } from './errors';
import type { LoadContext } from './load-context';
import type { MethodMetrics } from './metrics';
import type { MethodEntry } from './metrics-registry';
import type { StampedePolicy } from './policy';
import type { TracedCall } from './telemetry';

/**
 * Computes a value. `signal` aborts when the load passes its hard timeout; on `context` the
 * loader may set the TTL, grace and tags of the value it returns (see LoadContext).
 */
export type Loader<T> = (signal: AbortSignal, context: LoadContext) => Promise<T> | T;

export interface EngineLogger {
  warn(message: string): void;
}

/** One call of the flow: what it loads, how, and the versions of its tags when it started. */
export interface Call<T> {
  key: string;
  loader: Loader<T>;
  policy: StampedePolicy;
  m: MethodMetrics;
  /** The method's entry: its counters (`m`), label and telemetry. */
  e: MethodEntry;
  stamp?: Record<string, number>;
  /** Callers of the key in this process join this call's flow (single-flight). */
  shared?: boolean;
  /** Its flow has finished (see KeyStates#setCall). */
  done?: boolean;
}

export interface Outcome<T> {
  value: T;
  /** Served from the cache without waiting for a load. */
  hit: boolean;
  /** A stale value (within grace, or held while the store was unreachable). */
  stale?: boolean;
  /** Served by the in-process tier while the store failed (a hit otherwise reads the store). */
  fromL1?: boolean;
  /** This call's flow ran the loader (for its span). */
  loaded?: boolean;
  /** This call's flow waited for a lock (for its span). */
  waited?: boolean;
  /** This call's flow joined a lock path or fallback load already in flight (for its span). */
  joined?: boolean;
}

/** What the lock path did: the value, and whether it waited and loaded (or joined). */
export interface LockOutcome<T> {
  value: T;
  waited: boolean;
  loaded: boolean;
  joined?: boolean;
}

/** Whether a loaded value is cached: never `undefined`, `null` only with `cacheNull`. */
export function storable(value: unknown, policy: StampedePolicy): boolean {
  return value !== undefined && (value !== null || policy.cacheNull);
}

/**
 * The envelope of a value loaded from `started` to `now`, stamped with the call's tag versions
 * (or `stamp`), with its grace when it has one.
 */
export function envelopeOf<T>(
  call: Call<T>,
  value: T,
  started: number,
  now: number,
  ttl: number,
  grace = call.policy.grace,
  stamp = call.stamp,
) {
  const envelope: Envelope<T> = { v: value, d: now - started, e: now + ttl };
  if (stamp) envelope.t = stamp;
  if (grace > 0) envelope.g = grace;
  return envelope;
}

/** The text of a loaded value's envelope; one the serializer cannot write fails the call. */
export function encodeFor(codec: EnvelopeCodec, call: Call<unknown>, envelope: Envelope): string {
  try {
    return codec.encode(envelope);
  } catch (err) {
    throw new StampedeSerializationError(call.e.label, call.key, err);
  }
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Runs one call's flow inside its span, and ends the span with what the flow did. */
export async function traced<T>(
  span: TracedCall,
  flow: () => Promise<Outcome<T>>,
): Promise<Outcome<T>> {
  let outcome: Outcome<T>;
  try {
    outcome = await span.run(flow);
  } catch (err) {
    span.end('none', false, false, false, err);
    throw err;
  }
  span.end(
    outcome.fromL1 ? 'l1' : outcome.hit ? 'store' : 'none',
    outcome.waited === true,
    outcome.loaded === true,
    outcome.joined === true,
  );
  return outcome;
}
