/** Injection tokens of the demo. */
export const TICKS_REDIS = Symbol('TICKS_REDIS');
export const TICKS_CLIENT = 'TICKS_CLIENT';

/** The pattern of the consumer's handler; the server reads it from TICKS_STREAM (option `streams`). */
export const TICKS_PATTERN = 'ticks';
