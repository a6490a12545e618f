/** 2024-01-01T00:00:00Z: 41 bits of milliseconds from here last until 2093. */
export const SNOWFLAKE_EPOCH = 1_704_067_200_000;

/**
 * Twitter-style 63-bit ids: 41 bits of ms since SNOWFLAKE_EPOCH, 10 bits of worker id,
 * 12 bits of sequence within the ms (4096 ids per ms per worker; the next waits for the next ms).
 * Ids of one worker grow strictly; a clock that steps back is waited out.
 */
export class Snowflake {
  private lastMs = -1;
  private sequence = 0;

  constructor(
    readonly workerId: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(workerId) || workerId < 0 || workerId > 1023) {
      throw new RangeError(`Snowflake worker id must be 0..1023, got ${workerId}`);
    }
  }

  next(): bigint {
    let ms = this.now();
    if (ms < this.lastMs) ms = this.lastMs; // clock stepped back: stay on the last ms
    if (ms === this.lastMs) {
      this.sequence = (this.sequence + 1) & 0xfff;
      if (this.sequence === 0) {
        // 4096 ids in this ms: move to the next ms (logically; the id still grows).
        ms = this.lastMs + 1;
        while (this.now() < ms && this.now() >= this.lastMs) {
          /* spin until the clock reaches the next ms (at most 1 ms) */
        }
      }
    } else {
      this.sequence = 0;
    }
    this.lastMs = ms;
    return (
      (BigInt(ms - SNOWFLAKE_EPOCH) << 22n) | (BigInt(this.workerId) << 12n) | BigInt(this.sequence)
    );
  }
}
