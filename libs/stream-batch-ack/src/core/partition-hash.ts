/**
 * The partition of a key: FNV-1a (32 bit) of the key's UTF-8 bytes, modulo the partition count.
 *
 * FNV-1a is stable (the same number in every process, language and version of this library),
 * needs no table, and spreads short keys such as ticker symbols well. It is part of the wire
 * contract: a producer written in another language that wants to place entries itself must use
 * the same function (reference values in partition-hash.spec.ts).
 */
export function fnv1a32(key: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(key, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** The partition (0 .. count-1) of `key` among `count` partitions. */
export function partitionOf(key: string, count: number): number {
  return fnv1a32(key) % count;
}
