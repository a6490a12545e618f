export { StampedeModule } from './nest/stampede.module';
export type { StampedeFeatureOptions } from './nest/stampede.module';
export type { StampedeModuleExtras } from './nest/stampede.module-definition';
export { StampedeService } from './nest/stampede.service';
export type { StampedeSetOptions, InvalidateTagsOptions } from './nest/stampede.service';
export { StampedeNamespace } from './nest/stampede-namespace';
export {
  InjectStampede,
  getStampedeNamespaceToken,
  getStampedeStoreToken,
  getStampedeToken,
} from './nest/stampede.tokens';
export type { StampedeRef } from './nest/stampede.tokens';
export { Cacheable, DistLock, JitterTtl, SingleFlight, XFetch } from './nest/stampede.decorators';
export type { CacheableOptions } from './nest/stampede.decorators';
export { CacheableMany } from './nest/cacheable-many';
export type { CacheableManyOptions } from './nest/cacheable-many';
export type { StampedeModuleOptions } from './nest/stampede.options';
export { DEFAULT_STAMPEDE_NAME, STAMPEDE_STORE } from './nest/stampede.constants';
export { STAMPEDE_MODULE_OPTIONS } from './nest/stampede.module-definition';

// HTTP routes
export { CacheRoute } from './nest/route-cache.decorators';
export type { CacheRouteOptions, RoutePrivacy, RouteRequest } from './nest/route-cache.options';
export { routeCacheKey } from './nest/route-cache.key';
export {
  CACHE_STATUS_HEADER,
  ROUTE_KEY_PREFIX,
  STAMPEDE_ROUTE,
} from './nest/route-cache.constants';
export { StampedeInterceptor } from './nest/route-cache.interceptor';

export { parseDuration } from './core/duration';
export type { Duration } from './core/duration';
export { currentLoadSignal } from './core/stampede-engine';
export { currentLoadContext, LoadContext } from './core/load-context';
export type {
  BatchLoader,
  BatchResult,
  Loader,
  StampedeFailSafeState,
} from './core/stampede-engine';
export type { StampedeSerializer } from './core/envelope';
export type {
  PolicyOptions,
  TimeoutOptions,
  LockOptions,
  XFetchOptions,
  JitterOptions,
  StampedePolicy,
} from './core/policy';
export type { MethodMetrics } from './core/metrics';

// Telemetry and events
export type { TelemetryOptions } from './telemetry/telemetry.options';
export { STAMPEDE_INSTRUMENTATION_SCOPE, STAMPEDE_METRICS } from './telemetry/telemetry.options';
export { STAMPEDE_EVENTS } from './core/events';
export type {
  StampedeEventMap,
  StampedeEventName,
  StampedeEventListener,
  StampedeLockTimeoutEvent,
  StampedeStoreUnavailableEvent,
  StampedeStoreRecoveredEvent,
  StampedeLoadTimeoutEvent,
  StampedeFailSafeEvent,
  StampedeBusDownEvent,
  StampedeBusUpEvent,
} from './core/events';
export type { Envelope } from './core/envelope';
export type {
  StampedeStore,
  ValueStore,
  LockStore,
  InvalidationBus,
  ReadOrLockResult,
  FillWatch,
  InvalidationMessage,
  InvalidationMode,
  TagState,
} from './core/store';
export {
  StampedeError,
  StampedeConfigError,
  StampedeKeyError,
  StampedeTimeoutError,
  StampedeSerializationError,
  StampedeInvalidationError,
  StoreUnavailableError,
} from './core/errors';

export { RedisStore } from './redis/redis-store';
export type { RedisStoreOptions, RedisConnection } from './redis/redis-store';
export type { RedisClusterConnection } from '@nest-redis-resilience/common';
export { MemoryStore } from './memory/memory-store';
export type { MemoryStoreOptions } from './memory/memory-store';
export { CacheManagerStore } from './cache-manager/cache-manager-store';
export type { CacheManagerLike } from './cache-manager/cache-manager-store';
