import { backgroundClock, type Clock } from '@nest-redis-resilience/common';

/*
 * The one Clock of both packages (@nest-redis-resilience/common): the core and the stores take
 * one, so tests drive them with a ManualClock instead of waiting.
 */
export { type Clock, ManualClock } from '@nest-redis-resilience/common';

/** The system clock, with timers that never keep the process alive (a cache must not hold up shutdown). */
export const systemClock: Clock = backgroundClock;

/** A source of uniform numbers in [0, 1), like Math.random. */
export type RandomSource = () => number;

export const systemRandom: RandomSource = Math.random;
