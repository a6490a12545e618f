/** Default dead-letter stream of a stream. */
export const defaultDeadLetterStream = (stream: string): string => `${stream}:dlq`;

/** Key of the L2 idempotency record of `key` (one per group, so that two groups each process a message once). */
export const idempotencyKey = (prefix: string, group: string, key: string): string =>
  `${prefix}${group}:${key}`;

/** Default prefix of idempotency records. */
export const DEFAULT_IDEMPOTENCY_PREFIX = 'sba:idem:';

/**
 * The consumer group that marks a reply stream as made by a ClientRedisStreams, which creates it
 * before its first request: a server replies only into a stream that has it.
 */
export const REPLY_STREAM_MARKER = 'sba-reply';

/** How long a reply stream outlives its last reply, or a client's last request plus its timeout. */
export const REPLY_STREAM_IDLE_TTL_MS = 60_000;

const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    table[i] = crc & 0xffff;
  }
  return table;
})();

/**
 * The Redis Cluster hash slot of a key: CRC16 (XMODEM) of the key, or of its hash tag (the part
 * between the first `{` and the next `}`, when not empty), modulo 16384.
 *
 * Not the `cluster-key-slot` package: after an empty first tag (`foo{}{bar}`) it goes on to hash
 * `{bar`, where Redis hashes the whole key, so it would group streams Redis puts in other slots.
 */
export function keySlot(key: string): number {
  let bytes = Buffer.from(key, 'utf8');
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ b) & 0xff];
  return crc & 0x3fff;
}

/**
 * Splits streams into the groups that one `XREADGROUP` call can read. A single Redis reads all of
 * them in one call; on a Cluster one call may only name keys of one hash slot, so there is one
 * group per slot (streams that share a hash tag, like `{ticks}:btc` and `{ticks}:eth`, share one).
 */
export function groupStreamsForReading(streams: readonly string[], cluster: boolean): string[][] {
  if (streams.length === 0) return [];
  if (!cluster) return [[...streams]];
  const bySlot = new Map<number, string[]>();
  for (const stream of streams) {
    const slot = keySlot(stream);
    const group = bySlot.get(slot);
    if (group) group.push(stream);
    else bySlot.set(slot, [stream]);
  }
  return [...bySlot.values()];
}
