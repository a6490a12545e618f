import type { RedisConnection } from '@nest-redis-resilience/common';
import type { CacheManagerLike } from '../cache-manager/cache-manager-store';
import type { Duration } from '../core/duration';
import type { StampedeSerializer } from '../core/envelope';
import type { StampedeStore } from '../core/store';
import type { TelemetryOptions } from '../telemetry/telemetry.options';

export interface StampedeModuleOptions {
  /**
   * Redis to use: a redis:// URL, ioredis options, `{ cluster: nodes, clusterOptions? }` for a
   * Redis Cluster, or a client (Redis or Cluster) the app owns and closes.
   * Without `redis`, `cacheManager` or `store`, values and locks stay in this process.
   */
  redis?: RedisConnection;
  /** Keep values in an existing cache-manager Cache (e.g. injected CACHE_MANAGER); locks are then per process. */
  cacheManager?: CacheManagerLike;
  /** A custom store. */
  store?: StampedeStore;
  /** Prefix of every Redis key and of the notification channel. Default 'stampede:'. */
  keyPrefix?: string;
  /** TTL of methods that do not give one: ms or '30s', '5m'. Default '60s'. */
  defaultTtl?: Duration;
  /** Longest wait for one Redis operation before the call falls back to the loader (ms). Default 500. */
  operationTimeout?: number;
  /** After a Redis timeout, skip Redis for this long (ms). Default 1000. */
  cooldown?: number;
  /** Longest wait at start-up for Redis to answer before starting anyway (ms). Default 2000. */
  connectTimeout?: number;
  /**
   * An in-process tier in front of the store: hits cost no Redis round trip. `true` means
   * 10,000 entries and 64 MB of encoded values. Kept coherent across instances by invalidation
   * messages (`invalidate`, `invalidateTags`); while they cannot be received (the subscriber is
   * disconnected), a value is served from L1 for at most `maxStaleMs` (default 5000) before it
   * is read from Redis again; the same bound applies to the tag versions known here (without L1,
   * the default 5000). A hit decodes a fresh copy of the value, unless `shared`: then every hit
   * returns one copy, decoded when the value is kept and deep-frozen (plain objects and arrays),
   * which saves the decoding and the garbage of each hit; for callers that never change what
   * they get. Default: none.
   */
  l1?: boolean | { maxEntries?: number; maxBytes?: number; maxStaleMs?: number; shared?: boolean };
  /**
   * Without L1: the values this process read or loaded, kept to answer calls while a
   * distributed store is unreachable. Default 10,000 entries and 16 MB of encoded values.
   */
  lastKnown?: { maxEntries?: number; maxBytes?: number };
  /**
   * Bounds of the in-memory store (without `redis`, `cacheManager` or `store`): the least
   * recently used values go first. Default 100,000 entries and 128 MB of encoded values.
   */
  memory?: { maxEntries?: number; maxBytes?: number };
  /** How values are written to the store (and kept in L1). Default JSON. */
  serializer?: StampedeSerializer;
  /**
   * Metrics and traces through the OpenTelemetry API (`@opentelemetry/api`, an optional peer).
   * Both on by default: without an SDK registered they cost nothing measurable; without the API
   * installed they are off. `traceL1Hits` also traces calls answered by the in-process tier.
   */
  telemetry?: TelemetryOptions;
}
