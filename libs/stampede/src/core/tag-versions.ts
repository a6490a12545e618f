import { LruCache } from '@nest-redis-resilience/common';

/**
 * The versions of tags as this process knows them. Invalidating a tag gives it a new version
 * (in the store, where every instance sees it, and in a broadcast); a value is stamped with the
 * versions of its tags when its load starts, and is valid while none of them has moved on.
 * Reading stays free of Redis commands: a tag's version is fetched once, then kept current by
 * the broadcasts (and fetched again after a connection to the store comes back). While the
 * broadcasts are missed (the subscriber is down), a version is trusted for a bound only (see
 * `missing`).
 *
 * Versions only grow, and must keep growing when the stored versions are lost (a Redis restart
 * without persistence, a DEL, an eviction; a restart of this process with a cache that outlives
 * it): a new version is at least the time in microseconds (see `next`), so it starts above every
 * version issued before the loss as long as the clock does not go back. A version found missing
 * is set in the same way, so values stamped before the loss are not taken for current ones.
 */
interface TagState {
  version: number;
  /**
   * The hard floor of a tag invalidated softly since its last hard invalidation: a value stamped
   * at or above it, but below the current version, is stale (served within grace while one
   * refresh runs); below it, invalid. Without one, the current version is the floor.
   */
  hard?: number;
  /** When the version was last fetched from the store. */
  fetchedAt?: number;
  /** Its broadcasts may have been missed: fetch it again before use. */
  unverified?: boolean;
}

export class TagVersions {
  /** Bounded: past `maxTags`, the least recently used tag is forgotten (and fetched again when used). */
  private readonly tags: LruCache<TagState>;

  constructor(maxTags = 100_000) {
    this.tags = new LruCache<TagState>({ maxSize: maxTags, ttlMs: Infinity });
  }

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
    const state = this.tags.get(tag);
    return (
      state === undefined ||
      state.unverified === true ||
      (fetchedAfter !== undefined && (state.fetchedAt ?? -Infinity) <= fetchedAfter)
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
    let state = this.tags.get(tag);
    if (state === undefined || state.version <= version) {
      const known = state === undefined ? -1 : (state.hard ?? state.version);
      const floor = Math.min(version, Math.max(hardFloor, known));
      if (state === undefined) this.tags.set(tag, (state = { version }));
      state.version = version;
      state.hard = floor < version ? floor : undefined;
    }
    state.unverified = false;
    if (fetchedAt !== undefined) state.fetchedAt = fetchedAt;
  }

  /** A soft invalidation moved `tag` to `version`: values stamped before it turn stale. */
  learnSoft(tag: string, version: number): void {
    if (!isVersion(version)) return;
    const known = this.tags.get(tag);
    if (known !== undefined && known.version >= version) return;
    // Unknown here: no floor to keep, so older values are taken for invalid (a miss, not stale).
    this.learn(
      tag,
      version,
      undefined,
      known === undefined ? version : (known.hard ?? known.version),
    );
  }

  /** The version below which values of `tag` are invalid, if known here. */
  hardFloor(tag: string): number | undefined {
    const state = this.tags.get(tag);
    return state === undefined ? undefined : (state.hard ?? state.version);
  }

  /** The stamp for a value with these tags. */
  stamp(tags: string[]): Record<string, number> {
    const stamp: Record<string, number> = {};
    for (const tag of tags) stamp[tag] = this.tags.get(tag)?.version ?? 0;
    return stamp;
  }

  /**
   * The least version a new version of `tag` may take: above the one known here and, with
   * `nowMs`, at least `nowMs` in microseconds (the Redis store uses its server's clock instead).
   */
  next(tag: string, nowMs = 0): number {
    return Math.max((this.tags.get(tag)?.version ?? 0) + 1, Math.floor(nowMs) * 1000);
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
      const state = this.tags.get(tag);
      if (state === undefined || version > state.version) this.learn(tag, version);
      else if (version < (state.hard ?? state.version)) result = 'invalid';
      else if (version < state.version && result === 'current') result = 'stale';
    }
    return result;
  }

  /** Broadcasts may have been missed: fetch each version again before its next use. */
  reset(): void {
    for (const state of this.tags.values()) state.unverified = true;
  }

  /** Tags known, of them fetched from the store, and to verify: each bounded by `maxTags`. */
  get sizes(): { known: number; fetched: number; unverified: number } {
    let fetched = 0;
    let unverified = 0;
    for (const state of this.tags.values()) {
      if (state.fetchedAt !== undefined) fetched++;
      if (state.unverified) unverified++;
    }
    return { known: this.tags.size, fetched, unverified };
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
