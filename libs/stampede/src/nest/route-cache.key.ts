import { ROUTE_KEY_PREFIX } from './route-cache.constants';
import type { RouteRequest } from './route-cache.options';

export type HeaderValues = Record<string, string | string[] | undefined>;

/**
 * The key a route response is cached under, for `StampedeService.invalidate()`:
 * `routeCacheKey('/products?page=2&sort=name')` is `route:GET /products?page=2&sort=name`, and
 * `routeCacheKey('/greeting', { 'accept-language': 'fr' })` the key of a route with
 * `vary: ['accept-language']` requested with that header. `url` is the path and query string,
 * as the client sent it (with the app's global prefix, if any).
 */
export function routeCacheKey(url: string, vary: HeaderValues = {}): string {
  const names = Object.keys(vary).map((name) => name.toLowerCase());
  const lowered: HeaderValues = {};
  for (const [name, value] of Object.entries(vary)) lowered[name.toLowerCase()] = value;
  return routeKeyWith(`GET ${normalizeUrl(url)}`, names, lowered);
}

/** `GET <path>?<query sorted>`; HEAD shares GET's entry (same response without a body). */
export function defaultRouteBase(req: RouteRequest): string {
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  return `${method} ${normalizeUrl(req.originalUrl ?? req.url)}`;
}

/**
 * `route:` + base + one ` name=value` per vary header, sorted by name (the value URI-encoded,
 * so it holds no space; a header the request lacks is ` name` alone).
 */
export function routeKeyWith(base: string, vary: readonly string[], headers: HeaderValues): string {
  let key = ROUTE_KEY_PREFIX + base;
  for (const name of [...new Set(vary)].sort()) {
    const value = headers[name];
    if (value === undefined) key += ` ${name}`;
    else key += ` ${name}=${encodeURIComponent(Array.isArray(value) ? value.join(', ') : value)}`;
  }
  return key;
}

/**
 * The path as sent (not decoded, so `/a%2Fb` and `/a/b` stay apart), and the query parameters
 * sorted by name (a stable sort: repeated names keep their order, which a handler may rely on)
 * and re-encoded, so `?b=2&a=1` and `?a=1&b=2` share a key. A fragment is dropped.
 */
export function normalizeUrl(url: string): string {
  const hash = url.indexOf('#');
  const noFragment = hash === -1 ? url : url.slice(0, hash);
  const q = noFragment.indexOf('?');
  if (q === -1) return noFragment;
  const params = new URLSearchParams(noFragment.slice(q + 1));
  params.sort();
  const query = params.toString();
  return query ? `${noFragment.slice(0, q)}?${query}` : noFragment.slice(0, q);
}
