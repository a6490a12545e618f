/**
 * The versions of tags as this process knows them. Invalidating a tag increments its version
 * (in the store, where every instance sees it, and in a broadcast); a value is stamped with the
 * versions of its tags when its load starts, and is valid while none of them has moved on.
 * Reading stays free of Redis commands: a tag's version is fetched once, then kept current by
 * the broadcasts (and fetched again after the subscriber reconnects).
 */
export class TagVersions {
  private readonly known = new Map<string, number>();
  private readonly unverified = new Set<string>();

  constructor(private readonly maxTags = 100_000) {}

  /** The tags whose version must be fetched before use. */
  missing(tags: string[]): string[] {
    return tags.filter((tag) => !this.known.has(tag) || this.unverified.has(tag));
  }

  /** Records a version seen (fetched, broadcast, or stamped on a value); versions only grow. */
  learn(tag: string, version: number): void {
    this.unverified.delete(tag);
    if ((this.known.get(tag) ?? -1) >= version) return;
    if (this.known.size >= this.maxTags && !this.known.has(tag)) this.known.clear();
    this.known.set(tag, version);
  }

  /** The stamp for a value with these tags. */
  stamp(tags: string[]): Record<string, number> {
    const stamp: Record<string, number> = {};
    for (const tag of tags) stamp[tag] = this.known.get(tag) ?? 0;
    return stamp;
  }

  /** False when one of the stamped tags has been invalidated since; a newer stamp is learned. */
  valid(stamp: Record<string, number> | undefined): boolean {
    if (!stamp) return true;
    let valid = true;
    for (const [tag, version] of Object.entries(stamp)) {
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
}
