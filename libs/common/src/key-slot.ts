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
 * `{bar`, where Redis hashes the whole key, so it would group keys Redis puts in other slots.
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
