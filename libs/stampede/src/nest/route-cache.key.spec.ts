import { defaultRouteBase, normalizeUrl, routeCacheKey, routeKeyWith } from './route-cache.key';

describe('normalizeUrl', () => {
  it.each([
    ['/items', '/items'],
    ['/items?', '/items'],
    ['/items?b=2&a=1', '/items?a=1&b=2'],
    ['/items?a=1&b=2', '/items?a=1&b=2'],
    // repeated names keep their order: ?tag=x&tag=y is not ?tag=y&tag=x to a handler
    ['/items?tag=y&a=1&tag=x', '/items?a=1&tag=y&tag=x'],
    ['/items?q=a%20b', '/items?q=a+b'],
    ['/items?q=a+b', '/items?q=a+b'],
    ['/items?b=2#top', '/items?b=2'],
    ['/a%2Fb', '/a%2Fb'],
    ['//evil.example/items', '//evil.example/items'],
  ])('%p -> %p', (url, normalized) => expect(normalizeUrl(url)).toBe(normalized));
});

describe('route keys', () => {
  it('default: method, path and sorted query; HEAD shares the GET entry', () => {
    const req = { method: 'GET', url: '/x?b=1&a=2', headers: {} };
    expect(defaultRouteBase(req)).toBe('GET /x?a=2&b=1');
    expect(defaultRouteBase({ ...req, method: 'HEAD' })).toBe('GET /x?a=2&b=1');
    // Express: originalUrl keeps the part a mounted router strips from url
    expect(defaultRouteBase({ ...req, originalUrl: '/api/x?b=1' })).toBe('GET /api/x?b=1');
  });

  it("default: the query as the framework parsed it for the handler (req.query), not the URL's text", () => {
    const base = (url: string, query: unknown) =>
      defaultRouteBase({ method: 'GET', url, query, headers: {} });
    // Fastify hands q=a#X to the handler: the fragment-like tail is part of the key.
    expect(base('/x?q=a#X', { q: 'a#X' })).toBe('GET /x?q=a%23X');
    expect(base('/x?q=a', { q: 'a' })).toBe('GET /x?q=a');
    // Fastify keeps an escape that is not UTF-8 as sent; the URL's text would say U+FFFD.
    expect(base('/x?q=%FF', { q: '%FF' })).toBe('GET /x?q=%25FF');
    expect(base('/x?q=%EF%BF%BD', { q: '\uFFFD' })).toBe('GET /x?q=%EF%BF%BD');
    expect(base('/x#q=1', { q: '1' })).toBe('GET /x?q=1');
    expect(base('/x?tag=y&a=1&tag=x', { tag: ['y', 'x'], a: '1' })).toBe('GET /x?a=1&tag=y&tag=x');
    expect(base('/x?', {})).toBe('GET /x');
    // An extended parser's shapes (qs): JSON with sorted names, never equal to a flat query.
    expect(base('/x?a[]=1', { a: ['1'] })).toBe(`GET /x?json:${encodeURIComponent('{"a":["1"]}')}`);
    expect(base('/x?f[b]=2&f[a]=1', { f: { b: '2', a: '1' } })).toBe(
      `GET /x?json:${encodeURIComponent('{"f":{"a":"1","b":"2"}}')}`,
    );
    expect(base('/x?a=1', { a: '1' })).not.toBe(base('/x?a[]=1', { a: ['1'] }));
  });

  it('vary headers: sorted by name, values encoded, a missing header told apart from an empty one', () => {
    const headers = { 'accept-language': 'fr, en;q=0.5', 'x-tenant': '' };
    expect(routeKeyWith('GET /x', ['x-tenant', 'accept-language', 'x-missing'], headers)).toBe(
      'route:GET /x accept-language=fr%2C%20en%3Bq%3D0.5 x-missing x-tenant=',
    );
    expect(routeKeyWith('GET /x', [], headers)).toBe('route:GET /x');
    expect(routeKeyWith('GET /x', ['a'], { a: ['1', '2'] })).toBe('route:GET /x a=1%2C%202');
  });

  it('routeCacheKey gives the key a request makes', () => {
    const req = { method: 'GET', url: '/x?b=1&a=2', headers: { 'accept-language': 'fr' } };
    expect(routeCacheKey('/x?b=1&a=2', { 'Accept-Language': 'fr' })).toBe(
      routeKeyWith(defaultRouteBase(req), ['accept-language'], req.headers),
    );
    expect(routeCacheKey('/x')).toBe('route:GET /x');
  });
});
