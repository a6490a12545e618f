/** Time and randomness are injected so that the pure parts can be tested deterministically. */
export interface Clock {
  /** Milliseconds since the epoch (like Date.now()). */
  now(): number;
}

/** A source of uniform numbers in [0, 1), like Math.random. */
export type RandomSource = () => number;

export const systemClock: Clock = { now: () => Date.now() };
export const systemRandom: RandomSource = Math.random;
