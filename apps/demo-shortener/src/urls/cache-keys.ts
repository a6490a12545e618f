/*
 * Every Redis key of the app, in one place. Keys are `<REDIS_KEY_PREFIX>db-<databaseId>:` then
 * the stampede library's `{<key>}` (hash tag: one slot per key in a Cluster). The database
 * identity keeps a database created anew (codes starting at 1 again) from reading entries
 * cached for the old one under the same code.
 */

/** The stampede module's key prefix for this database. */
export function cacheKeyPrefix(redisKeyPrefix: string, databaseId: string): string {
  return `${redisKeyPrefix}db-${databaseId}:`;
}

/** The cached record of a code, or its cached "no such code" (null). */
export const urlCacheKey = (code: string) => `url:${code}`;

/**
 * The redirect count of a code, under the app's key prefix for this database: a counter in the
 * hash slot of the code's cached record (`{url:<code>}`), so that on a Redis Cluster the counts
 * spread over the masters with the cache instead of making one key every redirect's write.
 */
export const redirectCountKey = (prefix: string, code: string) =>
  `${prefix}{${urlCacheKey(code)}}:redirects`;
