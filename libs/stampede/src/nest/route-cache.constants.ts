/** Metadata key under which `@CacheRoute()` records its options (on a route method or a controller class). */
export const STAMPEDE_ROUTE = 'stampede:route';

/** Namespace of every route cache key: `route:GET /items?page=2`. */
export const ROUTE_KEY_PREFIX = 'route:';

/** The response header that tells whether the handler ran for this request. */
export const CACHE_STATUS_HEADER = 'x-cache';
