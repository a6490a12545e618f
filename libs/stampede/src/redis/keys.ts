/**
 * Key names in one place. The logical key sits in a `{hash tag}`, so a value and its lock hash
 * to the same Cluster slot (Redis hashes only the text between the first `{` and the next `}`,
 * and both names share that prefix).
 */
export class StampedeKeys {
  constructor(readonly prefix: string) {}

  value(key: string): string {
    return `${this.prefix}{${key}}`;
  }

  lock(key: string): string {
    return `${this.prefix}{${key}}:lock`;
  }

  /** One pub/sub channel per prefix carries every fill notification; the message is the logical key. */
  get channel(): string {
    return `${this.prefix}__fills`;
  }
}
