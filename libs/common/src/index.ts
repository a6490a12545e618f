/*
 * Code shared by @nest-redis-resilience/stampede and @nest-redis-resilience/stream-batch-ack
 * (both depend on this package; each re-exports what is part of its own API).
 */
export { backgroundClock, type Clock, ManualClock, systemClock } from './clock';
export { parseDuration } from './duration';
export { keySlot } from './key-slot';
export { LruCache, type LruCacheOptions } from './lru-cache';
export { editDistance, nearestName } from './nearest-name';
export { checkOptionNames, isPlainObject, type OptionNames, type OptionTree } from './option-names';
export {
  checkBoolean,
  checkFunction,
  checkGiven,
  checkNonEmptyString,
  checkNonNegative,
  checkNumberAtLeast,
  checkOneOf,
  checkPlainObject,
  checkPositiveInteger,
  checkPositiveNumber,
  checkRatio,
  checkString,
  checkWholeNumber,
  type OptionFail,
  type OptionReason,
} from './option-values';
export { type LuaScript, registerScripts, type ScriptHost } from './lua-script';
export {
  closeRedisClient,
  isClusterConnection,
  isClusterTarget,
  isRedisClient,
  type RedisClient,
  type RedisClientSettings,
  type RedisClusterConnection,
  type RedisConnection,
  redisClientOf,
} from './redis-connection';
