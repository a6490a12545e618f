import type { PolicyOptions } from '../core/policy';

/**
 * What a controller route handler receives: the Express `Request` or the Fastify
 * `FastifyRequest`. Only these fields are read by the default key.
 */
export interface RouteRequest {
  method: string;
  url: string;
  originalUrl?: string;
  /** The query as the framework parsed it for the handler; parsed from `url` when absent. */
  query?: unknown;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * Who a cached response may be served to. By default, RFC 9111's rules for a shared cache: a
 * request with `Authorization` or `Cookie` (unless `vary` names it) is neither served from nor
 * stored in the cache, and a response that sets a cookie or says `Cache-Control: private` is
 * not stored.
 * - `'public'`: the response is the same for every caller: requests are cached whatever
 *   credentials they carry, and a response that sets a cookie is stored (its cookie is not
 *   replayed on hits).
 * - `'private'`: the key names the caller (`key`, or `vary: ['authorization']` or `['cookie']`),
 *   so each caller has entries of its own: requests are cached whatever credentials they carry,
 *   and responses that set a cookie or say `Cache-Control: private` are stored.
 *
 * A response that says `Cache-Control: no-store` is never stored.
 */
export type RoutePrivacy = 'public' | 'private';

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
  /** Default: RFC 9111's shared-cache rules (see RoutePrivacy). */
  privacy?: RoutePrivacy;
}
