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

/**
 * `GET <path>?<query>` (HEAD shares GET's entry): the path as sent, up to the `?` or `#` where
 * Express and Fastify end it, and the query as the framework parsed it for the handler
 * (`req.query`), so two requests share an entry only when the handler sees the same path and
 * query: Fastify hands `?q=a#X` to the handler as `q=a#X`, and keeps `%FF` as sent.
 */
export function defaultRouteBase(req: RouteRequest): string {
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  const url = req.originalUrl ?? req.url;
  const query = typeof req.query === 'object' && req.query !== null ? req.query : parseQuery(url);
  return `${method} ${pathOf(url)}${serializeQuery(query as Record<string, unknown>)}`;
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
  return pathOf(url) + serializeQuery(parseQuery(url));
}

function pathOf(url: string): string {
  const end = url.search(/[?#]/);
  return end === -1 ? url : url.slice(0, end);
}

/** The query of a URL as a browser sends it (up to a fragment), parsed as Express and Fastify do. */
function parseQuery(url: string): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = Object.create(null);
  const start = url.indexOf('?');
  const hash = url.indexOf('#');
  if (start === -1 || (hash !== -1 && hash < start)) return query;
  for (const [name, value] of new URLSearchParams(
    url.slice(start + 1, hash === -1 ? undefined : hash),
  )) {
    const seen = query[name];
    query[name] = seen === undefined ? value : [...([] as string[]).concat(seen), value];
  }
  return query;
}

/**
 * `?a=1&b=2&b=3` for a flat query (strings, and arrays of two or more for repeated names: all
 * that Express' and Fastify's default parsers make). Anything else (nested objects or a
 * one-element array from an extended parser such as qs) is `?json:` + its URI-encoded JSON
 * with sorted names: a raw `:` never appears in the flat form, so the two never meet.
 */
function serializeQuery(query: Record<string, unknown>): string {
  const names = Object.keys(query).sort();
  if (names.length === 0) return '';
  const flat = names.every((name) => {
    const value = query[name];
    return (
      typeof value === 'string' ||
      (Array.isArray(value) && value.length > 1 && value.every((v) => typeof v === 'string'))
    );
  });
  if (!flat) return `?json:${encodeURIComponent(stableJson(query))}`;
  const params = new URLSearchParams();
  for (const name of names) {
    for (const value of ([] as string[]).concat(query[name] as string | string[])) {
      params.append(name, value);
    }
  }
  return `?${params.toString()}`;
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    const fields = Object.keys(record)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${stableJson(record[name])}`);
    return `{${fields.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
