import { Logger } from '@nestjs/common';
import { CacheManagerStore } from '../cache-manager/cache-manager-store';
import { toMs } from '../core/duration';
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
    return new CacheManagerStore(options.cacheManager);
  }
  return new MemoryStore();
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
  if (
    options.cooldown !== undefined &&
    !(typeof options.cooldown === 'number' && options.cooldown >= 0)
  ) {
    throw new StampedeConfigError(
      `StampedeModule: cooldown must be a number of ms >= 0, got ${String(options.cooldown)}`,
    );
  }
}
