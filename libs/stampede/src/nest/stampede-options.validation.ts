import {
  checkBoolean,
  checkNonNegative,
  checkOptionNames,
  checkPlainObject,
  checkPositiveInteger,
  checkPositiveNumber,
  checkString,
  type OptionNames,
} from '@nest-redis-resilience/common';
import { toMs } from '../core/duration';
import { StampedeConfigError } from '../core/errors';
import type { StampedeModuleOptions } from './stampede.options';

/** The module's option names; nested groups are checked below, with their values. */
const OPTION_NAMES: OptionNames<StampedeModuleOptions> = {
  redis: true,
  cacheManager: true,
  store: true,
  keyPrefix: true,
  defaultTtl: true,
  operationTimeout: true,
  cooldown: true,
  connectTimeout: true,
  l1: true,
  lastKnown: true,
  memory: true,
  serializer: true,
  telemetry: true,
};

function fail(option: string, reason: string): never {
  throw new StampedeConfigError(`StampedeModule option "${option}": ${reason}`);
}

function failValue(option: string, reason: string): never {
  throw new StampedeConfigError(`StampedeModule: ${option} ${reason}`);
}

/** Rejects invalid module options with an error that names the option. */
export function validateStampedeOptions(options: StampedeModuleOptions): void {
  // An unknown name (a misspelled `defaultTTL`, say) would otherwise be ignored without a word.
  checkOptionNames('StampedeModule', options, OPTION_NAMES, fail);
  const given = ['redis', 'cacheManager', 'store'].filter(
    (k) => options[k as keyof StampedeModuleOptions] !== undefined,
  );
  if (given.length > 1) {
    throw new StampedeConfigError(
      `StampedeModule: give one of redis, cacheManager or store, not ${given.join(' and ')}`,
    );
  }
  checkString('keyPrefix', options.keyPrefix, failValue, 'must be a string');
  if (options.defaultTtl !== undefined) toMs(options.defaultTtl, 'StampedeModule defaultTtl');
  // The common checkers want finite numbers; these three options also take Infinity (no limit).
  for (const name of ['operationTimeout', 'connectTimeout'] as const)
    if (options[name] !== Infinity)
      checkPositiveNumber(
        name,
        options[name],
        failValue,
        (got) => `must be a positive number of ms, got ${got}`,
      );
  for (const option of ['l1', 'lastKnown', 'memory'] as const) {
    const bounds: unknown = options[option];
    if (bounds === undefined || (option === 'l1' && typeof bounds === 'boolean')) continue;
    const known =
      option === 'l1'
        ? ['maxEntries', 'maxBytes', 'maxStaleMs', 'shared']
        : ['maxEntries', 'maxBytes'];
    checkPlainObject(
      option,
      bounds,
      failValue,
      `must be ${option === 'l1' ? 'a boolean or ' : ''}an object: { ${known.join('?, ')}? }`,
    );
    for (const [name, value] of Object.entries(bounds as object)) {
      if (!known.includes(name)) {
        throw new StampedeConfigError(
          `StampedeModule: unknown ${option} option ${name}; known: ${known.join(', ')}`,
        );
      }
      if (name === 'shared') checkBoolean(`${option}.${name}`, value, failValue);
      else checkPositiveInteger(`${option}.${name}`, value, failValue);
    }
  }
  if (
    options.serializer !== undefined &&
    (typeof options.serializer?.serialize !== 'function' ||
      typeof options.serializer?.deserialize !== 'function')
  ) {
    throw new StampedeConfigError(
      'StampedeModule: serializer needs serialize(value): string and deserialize(text): unknown',
    );
  }
  if (options.telemetry !== undefined) {
    checkPlainObject(
      'telemetry',
      options.telemetry,
      failValue,
      'must be an object: { metrics?, tracing?, traceL1Hits? }',
    );
    for (const [name, value] of Object.entries(options.telemetry)) {
      if (!['metrics', 'tracing', 'traceL1Hits'].includes(name)) {
        throw new StampedeConfigError(
          `StampedeModule: unknown telemetry option ${name}; known: metrics, tracing, traceL1Hits`,
        );
      }
      checkBoolean(`telemetry.${name}`, value, failValue);
    }
  }
  if (options.cooldown !== Infinity)
    checkNonNegative(
      'cooldown',
      options.cooldown,
      failValue,
      (got) => `must be a number of ms >= 0, got ${got}`,
    );
}
