import { Logger } from '@nestjs/common';
import { CacheManagerStore } from '../cache-manager/cache-manager-store';
import { toMs } from '../core/duration';
import { defaultCodec, EnvelopeCodec, StampedeSerializer } from '../core/envelope';
import { DEFAULT_MAX_STALE_MS } from '../core/invalidation-bus';
import type { L1Limits } from '../core/l1-cache';
import { StampedeConfigError } from '../core/errors';
import type { StampedeStore } from '../core/store';
import { MemoryStore } from '../memory/memory-store';
import { RedisStore } from '../redis/redis-store';
import type { StampedeModuleOptions } from './stampede.options';

/** Validates the module options and opens the store they name. */
export async function createStampedeStore(options: StampedeModuleOptions): Promise<StampedeStore> {
  validateOptions(options);
  const logger = new Logger('Stampede');
  if (options.store) return options.store;
  if (options.redis) {
    const store = new RedisStore(options.redis, {
      keyPrefix: options.keyPrefix,
      operationTimeout: options.operationTimeout,
      cooldown: options.cooldown,
      codec: codecOf(options),
    });
    const connectTimeout = options.connectTimeout ?? 2000;
    if (!(await store.waitUntilReady(connectTimeout))) {
      logger.warn(
        `Redis did not answer within ${connectTimeout} ms; decorated methods call their loaders without caching until it does`,
      );
    }
    return store;
  }
  if (options.cacheManager) {
    logger.warn(
      'using the cache-manager store: values are shared through its cache, but @DistLock locks only within this process ' +
        '(cache-manager has no atomic lock). Pass `redis` for one loader across instances.',
    );
    return new CacheManagerStore(options.cacheManager, undefined, codecOf(options));
  }
  return new MemoryStore({ codec: codecOf(options), ...options.memory });
}

const codecs = new WeakMap<StampedeSerializer, EnvelopeCodec>();

/** The envelope codec of the module's serializer (one per serializer). */
export function codecOf(options: StampedeModuleOptions): EnvelopeCodec {
  if (!options.serializer) return defaultCodec;
  let codec = codecs.get(options.serializer);
  if (!codec) {
    codec = new EnvelopeCodec(options.serializer);
    codecs.set(options.serializer, codec);
  }
  return codec;
}

export const DEFAULT_L1_ENTRIES = 10_000;
export const DEFAULT_L1_BYTES = 64 * 1024 * 1024;

/** The in-process tier's limits, or undefined for none. */
export function l1Limits(option: StampedeModuleOptions['l1']): L1Limits | undefined {
  if (!option) return undefined;
  const limits = option === true ? {} : option;
  return {
    maxEntries: limits.maxEntries ?? DEFAULT_L1_ENTRIES,
    maxBytes: limits.maxBytes ?? DEFAULT_L1_BYTES,
    maxStaleMs: limits.maxStaleMs ?? DEFAULT_MAX_STALE_MS,
  };
}

function validateOptions(options: StampedeModuleOptions): void {
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
