/** Injection tokens of the shortener app. */
export const URL_REPOSITORY = Symbol('shortener:url-repository');
/** The cache's Redis: a redis:// URL or a Cluster client (undefined without the cache). */
export const CACHE_REDIS = Symbol('shortener:cache-redis');
