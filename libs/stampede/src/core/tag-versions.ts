/**
 * The versions of tags as this process knows them. Invalidating a tag gives it a new version
 * (in the store, where every instance sees it, and in a broadcast); a value is stamped with the
 * versions of its tags when its load starts, and is valid while none of them has moved on.
 * Reading stays free of Redis commands: a tag's version is fetched once, then kept current by
 * the broadcasts (and fetched again after the subscriber reconnects). While the broadcasts are
 * missed (the subscriber is down), a version is trusted for a bound only (see `missing`).
 *
 * Versions only grow, and must keep growing when the stored versions are lost (a Redis restart
 * without persistence, a DEL, an eviction; a restart of this process with a cache that outlives
 * it): a new version is at least the time in microseconds (see `next`), so it starts above every
 * version issued before the loss as long as the clock does not go back. A version found missing
 * is set in the same way, so values stamped before the loss are not taken for current ones.
 */
export class TagVersions {
  private readonly known = new Map<string, number>();
  /**
   * The hard floor of tags invalidated softly since their last hard invalidation: a value stamped
   * at or above it, but below the current version, is stale (served within grace while one
   * refresh runs); below it, invalid. A tag without an entry has its current version as floor.
   */
  private readonly hard = new Map<string, number>();
  /** When each known version was last fetched from the store. */
  private readonly fetchedAt = new Map<string, number>();
  /** Known tags whose broadcasts may have been missed; a subset of `known`. */
  private readonly unverified = new Set<string>();

  constructor(private readonly maxTags = 100_000) {}

  /**
   * The tags whose version must be fetched before use. With `fetchedAfter` (broadcasts are being
   * missed), also those not fetched since then.
   */
  missing(tags: string[], fetchedAfter?: number): string[] {
    return tags.filter((tag) => this.isMissing(tag, fetchedAfter));
  }

  /** Whether `missing` would name one of `tags` (without allocating: the L1 hit path). */
  anyMissing(tags: string[], fetchedAfter?: number): boolean {
    for (const tag of tags) if (this.isMissing(tag, fetchedAfter)) return true;
    return false;
  }

  private isMissing(tag: string, fetchedAfter: number | undefined): boolean {
    return (
      !this.known.has(tag) ||
      this.unverified.has(tag) ||
      (fetchedAfter !== undefined && (this.fetchedAt.get(tag) ?? -Infinity) <= fetchedAfter)
    );
  }

  /**
   * Records a version seen (broadcast, stamped on a value, or fetched from the store at
   * `fetchedAt`); versions only grow. `hardFloor` is the version of the tag's last hard
   * invalidation, when known to be below `version` (a soft one came since); without it, values
   * stamped below `version` are invalid.
   */
  learn(tag: string, version: number, fetchedAt?: number, hardFloor = version): void {
    if (!isVersion(version)) return;
    this.unverified.delete(tag);
    const known = this.known.get(tag) ?? -1;
    if (known <= version) {
      if (this.known.size >= this.maxTags && !this.known.has(tag)) this.clear();
      const floor = Math.min(version, Math.max(hardFloor, this.hardFloor(tag) ?? -1));
      this.known.set(tag, version);
      if (floor < version) this.hard.set(tag, floor);
      else this.hard.delete(tag);
    }
    if (fetchedAt !== undefined) this.fetchedAt.set(tag, fetchedAt);
  }

  /** A soft invalidation moved `tag` to `version`: values stamped before it turn stale. */
  learnSoft(tag: string, version: number): void {
    if (!isVersion(version)) return;
    const known = this.known.get(tag);
    if (known !== undefined && known >= version) return;
    // Unknown here: no floor to keep, so older values are taken for invalid (a miss, not stale).
    this.learn(tag, version, undefined, known === undefined ? version : this.hardFloor(tag));
  }

  /** The version below which values of `tag` are invalid, if known here. */
  hardFloor(tag: string): number | undefined {
    return this.hard.get(tag) ?? this.known.get(tag);
  }

  /** The stamp for a value with these tags. */
  stamp(tags: string[]): Record<string, number> {
    const stamp: Record<string, number> = {};
    for (const tag of tags) stamp[tag] = this.known.get(tag) ?? 0;
    return stamp;
  }

  /**
   * The least version a new version of `tag` may take: above the one known here and, with
   * `nowMs`, at least `nowMs` in microseconds (the Redis store uses its server's clock instead).
   */
  next(tag: string, nowMs = 0): number {
    return Math.max((this.known.get(tag) ?? 0) + 1, Math.floor(nowMs) * 1000);
  }

  /** False when one of the stamped tags has been invalidated (hard) since; a newer stamp is learned. */
  valid(stamp: Record<string, number> | undefined): boolean {
    return this.check(stamp) !== 'invalid';
  }

  /**
   * `current` when none of the stamped tags moved on since; `stale` when some were invalidated
   * softly only; `invalid` when one was invalidated hard. A newer stamp is learned.
   */
  check(stamp: Record<string, number> | undefined): StampCheck {
    if (!stamp) return 'current';
    let result: StampCheck = 'current';
    // for...in, not Object.entries: every hit checks a stamp, and this allocates nothing.
    for (const tag in stamp) {
      const version = stamp[tag];
      if (!isVersion(version)) return 'invalid'; // not a stamp of ours: a miss
      const known = this.known.get(tag);
      if (known === undefined || version > known) this.learn(tag, version);
      else if (version < (this.hard.get(tag) ?? known)) result = 'invalid';
      else if (version < known && result === 'current') result = 'stale';
    }
    return result;
  }

  /** Broadcasts may have been missed: fetch each version again before its next use. */
  reset(): void {
    for (const tag of this.known.keys()) this.unverified.add(tag);
  }

  /** Forgets every tag, so that memory stays bounded by `maxTags`. */
  private clear(): void {
    this.known.clear();
    this.hard.clear();
    this.fetchedAt.clear();
    this.unverified.clear();
  }

  /** Tags known, fetch times and tags to verify: each bounded by `maxTags`. */
  get sizes(): { known: number; fetched: number; unverified: number } {
    return {
      known: this.known.size,
      fetched: this.fetchedAt.size,
      unverified: this.unverified.size,
    };
  }
}

/** What a value's stamp says about it (see `TagVersions#check`). */
export type StampCheck = 'current' | 'stale' | 'invalid';

/**
 * The tag every value is stamped with: its version is the generation of the whole key prefix,
 * which `clear()` moves on. Users' tags are never empty, so it cannot clash with one.
 */
export const ALL_KEYS_TAG = '';

function isVersion(version: unknown): version is number {
  return Number.isSafeInteger(version) && (version as number) >= 0;
}

const ALL_KEYS_ONLY = [ALL_KEYS_TAG];
const withAllKeys = new WeakMap<string[], string[]>();

/** `tags` and the tag of the whole prefix (see ALL_KEYS_TAG); kept per array, so a policy's costs one. */
export function withAllKeysTag(tags: string[] | undefined): string[] {
  if (tags === undefined || tags.length === 0) return ALL_KEYS_ONLY;
  let all = withAllKeys.get(tags);
  if (!all) {
    all = [ALL_KEYS_TAG, ...tags];
    withAllKeys.set(tags, all);
  }
  return all;
}
