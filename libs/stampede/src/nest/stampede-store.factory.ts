import { Logger } from '@nestjs/common';
import { CacheManagerStore } from '../cache-manager/cache-manager-store';
import { defaultCodec, EnvelopeCodec, StampedeSerializer } from '../core/envelope';
import { DEFAULT_MAX_STALE_MS } from '../core/invalidation-bus';
import type { L1Limits } from '../core/l1-cache';
import type { StampedeStore } from '../core/store';
import { MemoryStore } from '../memory/memory-store';
import { RedisStore } from '../redis/redis-store';
import type { StampedeModuleOptions } from './stampede.options';

/** Opens the store the module options name (validated by validateStampedeOptions). */
export async function createStampedeStore(options: StampedeModuleOptions): Promise<StampedeStore> {
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
    shared: limits.shared ?? false,
  };
}
