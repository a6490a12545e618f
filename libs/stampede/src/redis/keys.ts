/**
 * Key names in one place. The logical key sits in a `{hash tag}`, so a value, its lock and its
 * fill channel hash to the same Cluster slot (Redis hashes only the text between the first `{`
 * and the next `}`, and all three names share that prefix).
 */
export class StampedeKeys {
  constructor(readonly prefix: string) {}

  value(key: string): string {
    return `${this.prefix}{${key}}`;
  }

  lock(key: string): string {
    return `${this.prefix}{${key}}:lock`;
  }

  /** One channel per key: only the instances waiting for that key subscribe to it. */
  channel(key: string): string {
    return `${this.prefix}{${key}}:fill`;
  }

  /** The channel of invalidations, which every instance subscribes to. */
  get bus(): string {
    return `${this.prefix}__bus`;
  }

  /** A tag's version; `__tag:` never starts a value key, which starts with `{`. */
  tag(tag: string): string {
    return `${this.prefix}__tag:{${tag}}`;
  }

  /** The logical key of a fill channel, or undefined for a channel that is not one. */
  keyOfChannel(channel: string): string | undefined {
    if (!channel.startsWith(this.prefix) || !channel.endsWith('}:fill')) return undefined;
    return channel.slice(this.prefix.length + 1, -'}:fill'.length);
  }
}
