import { isPlainObject } from './option-names';

/** Throws the package's configuration error for `option` (as for `checkOptionNames`). */
export type OptionFail = (option: string, reason: string) => never;

/**
 * The reason given to `fail` when a value is refused: a sentence of its own, or one built from the
 * value as shown. The default of each checker is `must be <what>, got <value>`, with no final stop
 * (the package's `fail` adds its own punctuation).
 */
export type OptionReason = string | ((got: string) => string);

/*
 * Each checker accepts `undefined` (an option left out) and refuses anything else that is not of
 * its kind, calling `fail(option, reason)`. Numbers must be finite.
 */

/** Anything but `undefined`: for an option that must be given, before the check of its kind. */
export function checkGiven(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = 'must be given',
): void {
  if (value === undefined) refuse(option, 'undefined', fail, reason);
}

/** A finite number >= `min`. */
export function checkNumberAtLeast(
  option: string,
  value: unknown,
  min: number,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be a number >= ${min}, got ${got}`,
): void {
  if (value !== undefined && !(isFiniteNumber(value) && value >= min))
    refuse(option, String(value), fail, reason);
}

/** A finite number >= 0. */
export function checkNonNegative(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be a number >= 0, got ${got}`,
): void {
  checkNumberAtLeast(option, value, 0, fail, reason);
}

/** A finite number > 0. */
export function checkPositiveNumber(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be a positive number, got ${got}`,
): void {
  if (value !== undefined && !(isFiniteNumber(value) && value > 0))
    refuse(option, String(value), fail, reason);
}

/** An integer > 0. */
export function checkPositiveInteger(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be a positive integer, got ${got}`,
): void {
  if (value !== undefined && !(Number.isInteger(value) && (value as number) > 0))
    refuse(option, String(value), fail, reason);
}

/** An integer (of any sign). */
export function checkWholeNumber(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be a whole number, got ${got}`,
): void {
  if (value !== undefined && !Number.isInteger(value)) refuse(option, String(value), fail, reason);
}

/** A number in [0, 1). */
export function checkRatio(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be in [0, 1), got ${got}`,
): void {
  if (value !== undefined && !(typeof value === 'number' && value >= 0 && value < 1))
    refuse(option, String(value), fail, reason);
}

/** `true` or `false`. */
export function checkBoolean(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be a boolean, got ${got}`,
): void {
  if (value !== undefined && typeof value !== 'boolean')
    refuse(option, String(value), fail, reason);
}

/** A string, empty or not. */
export function checkString(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be a string, got ${got}`,
): void {
  if (value !== undefined && typeof value !== 'string') refuse(option, shown(value), fail, reason);
}

/** A string of at least one character. */
export function checkNonEmptyString(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be a non-empty string, got ${got}`,
): void {
  if (value !== undefined && (typeof value !== 'string' || value === ''))
    refuse(option, shown(value), fail, reason);
}

/** A function. */
export function checkFunction(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be a function, got ${got}`,
): void {
  if (value !== undefined && typeof value !== 'function')
    refuse(option, shown(value), fail, reason);
}

/** An object that is not null nor an array. */
export function checkPlainObject(
  option: string,
  value: unknown,
  fail: OptionFail,
  reason: OptionReason = (got) => `must be an object, got ${got}`,
): void {
  if (value !== undefined && !isPlainObject(value)) refuse(option, shown(value), fail, reason);
}

/** One of `allowed`, compared with `===`. */
export function checkOneOf(
  option: string,
  value: unknown,
  allowed: readonly unknown[],
  fail: OptionFail,
  reason: OptionReason = (got) => `must be ${listOf(allowed)}, got ${got}`,
): void {
  if (value !== undefined && !allowed.includes(value)) refuse(option, shown(value), fail, reason);
}

function isFiniteNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function refuse(option: string, got: string, fail: OptionFail, reason: OptionReason): never {
  return fail(option, typeof reason === 'string' ? reason : reason(got));
}

/** `'a', 'b' or 'c'`. */
function listOf(allowed: readonly unknown[]): string {
  const quoted = allowed.map((value) => (typeof value === 'string' ? `'${value}'` : shown(value)));
  return quoted.length < 2
    ? quoted.join('')
    : `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`;
}

/** A refused value as JSON (a string in quotes), or as `String()` gives it when JSON cannot. */
function shown(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
