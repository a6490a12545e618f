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
    return tags.filter(
      (tag) =>
        !this.known.has(tag) ||
        this.unverified.has(tag) ||
        (fetchedAfter !== undefined && (this.fetchedAt.get(tag) ?? -Infinity) <= fetchedAfter),
    );
  }

  /**
   * Records a version seen (broadcast, stamped on a value, or fetched from the store at
   * `fetchedAt`); versions only grow.
   */
  learn(tag: string, version: number, fetchedAt?: number): void {
    if (!isVersion(version)) return;
    this.unverified.delete(tag);
    if ((this.known.get(tag) ?? -1) < version) {
      if (this.known.size >= this.maxTags && !this.known.has(tag)) this.clear();
      this.known.set(tag, version);
    }
    if (fetchedAt !== undefined) this.fetchedAt.set(tag, fetchedAt);
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

  /** False when one of the stamped tags has been invalidated since; a newer stamp is learned. */
  valid(stamp: Record<string, number> | undefined): boolean {
    if (!stamp) return true;
    let valid = true;
    for (const [tag, version] of Object.entries(stamp)) {
      if (!isVersion(version)) return false; // not a stamp of ours: a miss
      const known = this.known.get(tag);
      if (known === undefined || version > known) this.learn(tag, version);
      else if (version < known) valid = false;
    }
    return valid;
  }

  /** Broadcasts may have been missed: fetch each version again before its next use. */
  reset(): void {
    for (const tag of this.known.keys()) this.unverified.add(tag);
  }

  /** Forgets every tag, so that memory stays bounded by `maxTags`. */
  private clear(): void {
    this.known.clear();
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

function isVersion(version: unknown): version is number {
  return Number.isSafeInteger(version) && (version as number) >= 0;
}
