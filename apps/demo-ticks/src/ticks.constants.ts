/** Injection tokens of the demo. */
export const TICKS_REDIS = Symbol('TICKS_REDIS');
export const TICKS_CLIENT = 'TICKS_CLIENT';
