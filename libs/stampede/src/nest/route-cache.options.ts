import type { PolicyOptions } from '../core/policy';

/**
 * What a controller route handler receives: the Express `Request` or the Fastify
 * `FastifyRequest`. Only these fields are read by the default key.
 */
export interface RouteRequest {
  method: string;
  url: string;
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * Options of `@CacheRoute()`: the policy options of `getOrLoad` (ttl, cacheNull, singleFlight,
 * xfetch, lock, jitter; caching is implied) plus how the request maps to a key.
 */
export interface CacheRouteOptions<Req = any> extends Omit<PolicyOptions, 'cache'> {
  /**
   * Cache key from the request; the stored key is `route:` + this + the `vary` values.
   * Default: `route:GET <path>?<query, params sorted by name>` (HEAD shares GET's entry).
   */
  key?: (req: Req) => string;
  /**
   * Request header names whose values select a different cached response
   * (e.g. `['accept-language']`); case-insensitive. Default none.
   */
  vary?: string[];
}
