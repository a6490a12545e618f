import { fieldsToObject } from '../core/entry-codec';
import { describeError } from '../core/errors';

/** Why the server dead-lettered an entry. */
export type DeadLetterCause = 'malformed' | 'max-deliveries' | 'handler-failed';

/** Why an entry was dead-lettered: a DeadLetterCause, or a string for entries written by other tools. */
export type DeadLetterReason = DeadLetterCause | (string & {});

/** One entry of a dead-letter stream, as written by ServerRedisStreams. */
export interface DeadLetter {
  /** Id of the entry in the dead-letter stream (what `get`, `replay` and `drop` take). */
  deadLetterId: string;
  /**
   * The stream the entry came from (its `stream` field), and where `replay` appends it again. An
   * entry without one shows the stream it was read for, and has a `problem`.
   */
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
  /**
   * Set when the entry cannot be replayed: its `fields` are missing or not a JSON object of
   * strings, or it does not name the stream it came from.
   */
  problem?: string;
}

/**
 * The fields ServerRedisStreams writes in every dead letter (`transport/dead-letter-writer.ts`).
 * An entry that has all of them is taken for a dead letter of this library.
 */
export const DEAD_LETTER_FIELDS = [
  'stream',
  'id',
  'group',
  'consumer',
  'deliveries',
  'reason',
  'error',
  'errorName',
  'stack',
  'failedAt',
  'fields',
] as const;

/** What a dead letter says about the entry it holds (see `deadLetterFields`). */
export interface DeadLetterSource {
  /** The stream the entry came from. */
  stream: string;
  /** Its id there. */
  id: string;
  group: string;
  consumer: string;
  deliveries: number;
  reason: DeadLetterReason;
  /** What was thrown, or a message saying why the entry cannot be handled. */
  error: unknown;
  /** The entry's fields (what a replay appends again). */
  fields: Record<string, string>;
}

/**
 * The fields of a dead letter, as ServerRedisStreams writes them (flat `[field, value, ...]`, for
 * XADD): for a handler that dead-letters entries itself (`DeadLetters`, `sba-dlq` and the health
 * checks then read them as the server's own).
 */
export function deadLetterFields(source: DeadLetterSource): string[] {
  const { error } = source;
  return [
    'stream',
    source.stream,
    'id',
    source.id,
    'group',
    source.group,
    'consumer',
    source.consumer,
    'deliveries',
    String(source.deliveries),
    'reason',
    source.reason,
    'error',
    describeError(error),
    'errorName',
    error instanceof Error ? error.name : typeof error,
    'stack',
    error instanceof Error && error.stack ? error.stack : '',
    'failedAt',
    new Date().toISOString(),
    'fields',
    JSON.stringify(source.fields),
  ];
}

/** The dead-letter fields that a stream entry (flat field, value list) does not have. */
export function missingDeadLetterFields(flat: readonly string[] | null): string[] {
  const present = new Set((flat ?? []).filter((_, i) => i % 2 === 0));
  return DEAD_LETTER_FIELDS.filter((name) => !present.has(name));
}

/** A stream entry id as Redis takes it: `<ms>-<seq>` or `<ms>`. */
export function isStreamId(id: string): boolean {
  return /^\d+(-\d+)?$/.test(id);
}

/**
 * Reads a dead-letter entry. Never throws: an entry whose `fields` can't be read is returned with
 * `fields: {}` and a `problem`. `stream` is shown when the entry does not name its stream (which
 * is a `problem` too: replay does not guess where it came from).
 */
export function parseDeadLetter(
  deadLetterId: string,
  flat: readonly string[] | null,
  stream: string,
): DeadLetter {
  const f = fieldsToObject(flat);
  const deliveries = Number(f.deliveries);
  const original = parseOriginalFields(f.fields);
  const problem =
    original.problem ??
    (f.stream ? undefined : 'it has no "stream" field (the stream it came from)');
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
    ...(problem ? { problem } : {}),
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
