import { checkOptionNames, type OptionNames } from '@nest-redis-resilience/common';
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
  if (options.keyPrefix !== undefined && typeof options.keyPrefix !== 'string') {
    throw new StampedeConfigError('StampedeModule: keyPrefix must be a string');
  }
  if (options.defaultTtl !== undefined) toMs(options.defaultTtl, 'StampedeModule defaultTtl');
  for (const name of ['operationTimeout', 'connectTimeout'] as const) {
    const value = options[name];
    if (value !== undefined && !(typeof value === 'number' && value > 0)) {
      throw new StampedeConfigError(
        `StampedeModule: ${name} must be a positive number of ms, got ${String(value)}`,
      );
    }
  }
  for (const option of ['l1', 'lastKnown', 'memory'] as const) {
    const bounds: unknown = options[option];
    if (bounds === undefined || (option === 'l1' && typeof bounds === 'boolean')) continue;
    const known =
      option === 'l1' ? ['maxEntries', 'maxBytes', 'maxStaleMs'] : ['maxEntries', 'maxBytes'];
    if (typeof bounds !== 'object' || bounds === null) {
      throw new StampedeConfigError(
        `StampedeModule: ${option} must be ${option === 'l1' ? 'a boolean or ' : ''}an object: { ${known.join('?, ')}? }`,
      );
    }
    for (const [name, value] of Object.entries(bounds)) {
      if (!known.includes(name)) {
        throw new StampedeConfigError(
          `StampedeModule: unknown ${option} option ${name}; known: ${known.join(', ')}`,
        );
      }
      if (value !== undefined && !(Number.isInteger(value) && (value as number) > 0)) {
        throw new StampedeConfigError(
          `StampedeModule: ${option}.${name} must be a positive integer, got ${String(value)}`,
        );
      }
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
    if (typeof options.telemetry !== 'object' || options.telemetry === null) {
      throw new StampedeConfigError(
        'StampedeModule: telemetry must be an object: { metrics?, tracing?, traceL1Hits? }',
      );
    }
    for (const [name, value] of Object.entries(options.telemetry)) {
      if (!['metrics', 'tracing', 'traceL1Hits'].includes(name)) {
        throw new StampedeConfigError(
          `StampedeModule: unknown telemetry option ${name}; known: metrics, tracing, traceL1Hits`,
        );
      }
      if (value !== undefined && typeof value !== 'boolean') {
        throw new StampedeConfigError(
          `StampedeModule: telemetry.${name} must be a boolean, got ${String(value)}`,
        );
      }
    }
  }
  if (
    options.cooldown !== undefined &&
    !(typeof options.cooldown === 'number' && options.cooldown >= 0)
  ) {
    throw new StampedeConfigError(
      `StampedeModule: cooldown must be a number of ms >= 0, got ${String(options.cooldown)}`,
    );
  }
}
