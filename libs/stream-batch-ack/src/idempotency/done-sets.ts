/**
 * Where the Redis store keeps the done marks of stream entries under the default key (the entry
 * itself): one Redis set of entry ids per stream and per slice of entry ids, instead of one key
 * per entry. Adding 500 ids to a set is one command, and a set expires as a whole, so a mark
 * costs Redis about a fifth of a `SET key done PX ttl`.
 *
 * A slice is 100 ms of entry ids (ids are `<ms>-<seq>`): the ids of one read batch usually fall
 * into one slice, and a stream written at 200,000 entries/s gives sets of 20,000. Ids that a
 * producer chose itself can pile up in one ms (`XADD s 5-* ...`): every 100,000 sequence numbers
 * then start a slice of their own, so that no set keeps growing while it is written to.
 */
export const DONE_SLICE_MS = 100;
export const DONE_SLICE_SEQS = 100_000;
/** Digits of the greatest sequence number of a slice's own ms (99,999). */
const SEQ_DIGITS = String(DONE_SLICE_SEQS - 1).length;

/** The slice of an entry id (`'17000000000'` for `1700000000000-5`), or `'?'` for a malformed one. */
export function doneSlice(id: string): string {
  const dash = id.indexOf('-');
  const ms = Number(dash < 0 ? id : id.slice(0, dash));
  if (!Number.isSafeInteger(ms) || ms < 0) return '?';
  const slice = String(Math.floor(ms / DONE_SLICE_MS));
  if (dash < 0) return slice;
  const seq = Number(id.slice(dash + 1));
  return seq >= DONE_SLICE_SEQS ? `${slice}.${Math.floor(seq / DONE_SLICE_SEQS)}` : slice;
}

/** The set of done entry ids of `scope` (`<group>:<stream>`) for one slice. */
export const doneSetKey = (keyPrefix: string, scope: string, slice: string): string =>
  `${keyPrefix}${scope}:done:${slice}`;

/**
 * The greatest entry id of `scope` marked done (a string key, refreshed with every mark): a first
 * delivery above it cannot be done, so a read batch of new entries needs no look into the sets.
 * Only a consumer group created again at an earlier id hands out entries below it a second time.
 */
export const doneMaxKey = (keyPrefix: string, scope: string): string =>
  `${keyPrefix}${scope}:done:max`;

/**
 * Compares two entry ids (`<ms>-<seq>`, digits without leading zeros, as Redis writes them)
 * exactly and without allocating: a longer number is the greater one, else the digits decide.
 */
export function compareIds(a: string, b: string): number {
  let da = a.indexOf('-');
  let db = b.indexOf('-');
  // The usual case, ids of one stream written within a few days: same shape, compare as text.
  if (da === db && a.length === b.length) return a < b ? -1 : a > b ? 1 : 0;
  if (da < 0) da = a.length;
  if (db < 0) db = b.length;
  const byMs = compareDigits(a, 0, da, b, 0, db);
  if (byMs !== 0) return byMs;
  return compareDigits(a, da + 1, a.length, b, db + 1, b.length);
}

/** Compares the numbers written in a[aFrom, aTo) and b[bFrom, bTo) (an empty one is 0). */
function compareDigits(
  a: string,
  aFrom: number,
  aTo: number,
  b: string,
  bFrom: number,
  bTo: number,
): number {
  const la = Math.max(0, aTo - aFrom);
  const lb = Math.max(0, bTo - bFrom);
  if (la !== lb) {
    // '' and '0' are both zero
    if (la + lb === 1 && (la === 1 ? a[aFrom] : b[bFrom]) === '0') return 0;
    return la < lb ? -1 : 1;
  }
  for (let i = 0; i < la; i++) {
    const x = a.charCodeAt(aFrom + i);
    const y = b.charCodeAt(bFrom + i);
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/** Indexes of `ids` per slice, in the order the slices first appear. */
export function bySlice(ids: readonly string[], indexes: readonly number[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  // Ids of one ms (`<ms>-`) and a sequence number below DONE_SLICE_SEQS share the last one's slice.
  let msPrefix = '';
  let last: number[] | undefined;
  for (const i of indexes) {
    const id = ids[i];
    if (
      last &&
      msPrefix !== '' &&
      id.startsWith(msPrefix) &&
      id.length - msPrefix.length <= SEQ_DIGITS
    ) {
      last.push(i);
      continue;
    }
    const slice = doneSlice(id);
    last = out.get(slice);
    if (!last) out.set(slice, (last = []));
    last.push(i);
    const dash = id.indexOf('-');
    msPrefix = dash > 0 && id.length - dash - 1 <= SEQ_DIGITS ? id.slice(0, dash + 1) : '';
  }
  return out;
}
