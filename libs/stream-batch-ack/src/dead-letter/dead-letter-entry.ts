import { fieldsToObject } from '../core/entry-codec';
import { describeError } from '../core/errors';

/** Why the server dead-lettered an entry (a string too, for entries written by other tools). */
export type DeadLetterReason = 'malformed' | 'max-deliveries' | 'handler-failed' | (string & {});

/** One entry of a dead-letter stream, as written by ServerRedisStreams. */
export interface DeadLetter {
  /** Id of the entry in the dead-letter stream (what `get`, `replay` and `drop` take). */
  deadLetterId: string;
  /** The stream the entry came from, and where `replay` appends it again. */
  stream: string;
  /** Id of the original entry in `stream`. */
  id: string;
  group: string;
  consumer: string;
  deliveries: number;
  reason: DeadLetterReason;
  /** The handler's error message. */
  error: string;
  errorName: string;
  stack: string;
  /** When it was dead-lettered: the ISO 8601 string the server wrote (`new Date(failedAt)`). */
  failedAt: string;
  /** The fields of the original entry (what `replay` appends). */
  fields: Record<string, string>;
  /** Set when the entry cannot be replayed (its `fields` are missing or not a JSON object of strings). */
  problem?: string;
}

/** A stream entry id as Redis takes it: `<ms>-<seq>` or `<ms>`. */
export function isStreamId(id: string): boolean {
  return /^\d+(-\d+)?$/.test(id);
}

/**
 * Reads a dead-letter entry. Never throws: an entry whose `fields` can't be read is returned with
 * `fields: {}` and a `problem`. `stream` is used when the entry does not name its stream.
 */
export function parseDeadLetter(
  deadLetterId: string,
  flat: readonly string[] | null,
  stream: string,
): DeadLetter {
  const f = fieldsToObject(flat);
  const deliveries = Number(f.deliveries);
  const original = parseOriginalFields(f.fields);
  return {
    deadLetterId,
    stream: f.stream || stream,
    id: f.id ?? '',
    group: f.group ?? '',
    consumer: f.consumer ?? '',
    deliveries: Number.isFinite(deliveries) ? deliveries : 0,
    reason: f.reason ?? '',
    error: f.error ?? '',
    errorName: f.errorName ?? '',
    stack: f.stack ?? '',
    failedAt: f.failedAt ?? '',
    fields: original.fields,
    ...(original.problem ? { problem: original.problem } : {}),
  };
}

function parseOriginalFields(json: string | undefined): {
  fields: Record<string, string>;
  problem?: string;
} {
  if (json === undefined) return { fields: {}, problem: 'it has no "fields" field' };
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    return { fields: {}, problem: `its "fields" field is not valid JSON (${describeError(err)})` };
  }
  if (
    !value ||
    typeof value !== 'object' ||
    Array.isArray(value) ||
    Object.values(value).some((v) => typeof v !== 'string')
  )
    return { fields: {}, problem: 'its "fields" field is not a JSON object of strings' };
  // XADD needs at least one field.
  if (Object.keys(value).length === 0)
    return { fields: {}, problem: 'its "fields" field is empty' };
  return { fields: value as Record<string, string> };
}
