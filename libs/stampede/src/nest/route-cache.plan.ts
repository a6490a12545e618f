import { RequestMethod, Type } from '@nestjs/common';
import { checkFunction, checkOneOf, checkPlainObject } from '@nest-redis-resilience/common';
import {
  METHOD_METADATA,
  PATH_METADATA,
  RESPONSE_PASSTHROUGH_METADATA,
  ROUTE_ARGS_METADATA,
  RouteParamtypes,
  SSE_METADATA,
} from './nest-internals';
import { StampedeConfigError, StampedeKeyError } from '../core/errors';
import { failAt, type PolicyOptions, type StampedePolicy } from '../core/policy';
import { STAMPEDE_ROUTE } from './route-cache.constants';
import { defaultRouteBase, routeKeyWith } from './route-cache.key';
import type { CacheRouteOptions, RouteRequest } from './route-cache.options';
import { STAMPEDE_POLICY } from './stampede.constants';
import type { MethodPolicyMetadata } from './stampede.decorators';

/** How one route is cached: built once per route, at start-up or at its first request. */
export interface RoutePlan {
  /** `Controller.method`: names the metrics and the errors. */
  name: string;
  policy: StampedePolicy;
  keyOf(req: RouteRequest): string;
  /** The request carries credentials that the key does not cover: serve it without the cache. */
  bypasses(req: RouteRequest): boolean;
  /** Whether a response with these headers may be stored (and shared with joined requests). */
  stores(header: (name: string) => unknown): boolean;
}

/** A route handler: a method of a controller's prototype. */
export type RouteHandler = (...args: any[]) => unknown;

export type ResolvePolicy = (options: PolicyOptions, where: string) => StampedePolicy;

const POLICY_FIELDS = ['ttl', 'cacheNull', 'singleFlight', 'xfetch', 'lock', 'jitter'] as const;
const ROUTE_FIELDS: readonly string[] = [...POLICY_FIELDS, 'key', 'vary', 'privacy'];
/** Request headers that make a response depend on the caller (RFC 9111, section 3.5). */
const CREDENTIALS = ['authorization', 'cookie'];
const CACHEABLE_METHODS = [RequestMethod.GET, RequestMethod.HEAD, RequestMethod.ALL];

/**
 * Reads what `@CacheRoute()` (on the method or the controller) and the method's stampede
 * decorators recorded, validates it and composes one policy: `@CacheRoute` on the controller,
 * then the method's `@SingleFlight`/`@XFetch`/`@DistLock`/`@JitterTtl`/`@Cacheable`, then
 * `@CacheRoute` on the method (a later one wins an option both give). Returns undefined for a
 * method that none of them mark. Errors name `Controller.method` and say what to change.
 */
export function compileRoutePlan(
  controller: Type,
  methodName: string,
  handler: RouteHandler,
  resolve: ResolvePolicy,
): RoutePlan | undefined {
  const name = `${controller.name}.${methodName}`;
  const onClass = Reflect.getMetadata(STAMPEDE_ROUTE, controller) as CacheRouteOptions | undefined;
  const onMethod = Reflect.getMetadata(STAMPEDE_ROUTE, handler) as CacheRouteOptions | undefined;
  const decorators = Reflect.getMetadata(STAMPEDE_POLICY, handler) as
    MethodPolicyMetadata | undefined;
  if (!onClass && !onMethod && !decorators) return undefined;
  const marked = onMethod ? '@CacheRoute' : 'a stampede decorator';

  if (Reflect.getMetadata(PATH_METADATA, handler) === undefined) {
    if (!onMethod && !decorators) return undefined; // a helper method of a @CacheRoute controller
    throw new StampedeConfigError(
      `${name} has ${marked} but is not a route handler: on a controller, @CacheRoute and the ` +
        `stampede decorators work on GET routes only (StampedeExplorer wraps provider methods, ` +
        `not controllers). Move the method to a provider.`,
    );
  }
  const requestMethod = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod;
  if (!CACHEABLE_METHODS.includes(requestMethod)) {
    if (!onMethod && !decorators) return undefined; // a POST route of a @CacheRoute controller
    throw new StampedeConfigError(
      `${name} has ${marked} but is a ${RequestMethod[requestMethod]} route: only GET and HEAD ` +
        `responses are cached. Remove it, or put the cached lookup in a provider method.`,
    );
  }
  if (Reflect.getMetadata(SSE_METADATA, handler)) {
    throw new StampedeConfigError(
      `${name} is an @Sse() route, whose event stream cannot be cached: remove ${marked}.`,
    );
  }
  const writer = responseWriter(controller, methodName);
  if (writer) {
    const fix =
      writer === '@Res()'
        ? 'return the body instead, or use @Res({ passthrough: true })'
        : 'return the body instead of calling next()';
    throw new StampedeConfigError(
      `${name} takes ${writer} without passthrough, so it writes the response itself and there is ` +
        `no return value to cache: ${fix}, or remove ${marked}.`,
    );
  }

  for (const [where, options] of [
    ['the controller', onClass],
    ['the method', onMethod],
  ] as const) {
    if (options !== undefined) checkRouteOptions(options, `${name}: @CacheRoute on ${where}`);
  }
  if (decorators?.stampede !== undefined || decorators?.namespace !== undefined) {
    throw new StampedeConfigError(
      `${name}: routes are cached by the default configuration, so @Cacheable({ stampede, namespace }) ` +
        `does not apply to them; put the lookup in a provider method that names its configuration.`,
    );
  }
  if (decorators?.key) {
    throw new StampedeConfigError(
      `${name}: @Cacheable({ key }) on a route gets no method arguments; ` +
        `use @CacheRoute({ key: (req) => ... }) instead.`,
    );
  }

  const policyOptions: PolicyOptions = {
    ...pickPolicy(onClass),
    ...pickPolicy(decorators),
    ...pickPolicy(onMethod),
    // @CacheRoute caches; the decorators alone cache as they do on a provider (not @SingleFlight).
    cache: onClass || onMethod ? true : (decorators?.cache ?? false),
  };
  const policy = resolve(policyOptions, name);

  const keyFn = onMethod?.key ?? onClass?.key;
  const vary = (onMethod?.vary ?? onClass?.vary ?? []).map((h) => h.toLowerCase());
  const keyOf = (req: RouteRequest): string => {
    let base: unknown;
    if (keyFn) {
      base = keyFn(req);
      if (typeof base !== 'string' || base === '') {
        throw new StampedeKeyError(
          `${name}: the @CacheRoute key function returned ${base === '' ? 'an empty string' : typeof base}; return a non-empty string`,
        );
      }
    } else {
      base = defaultRouteBase(req);
    }
    return routeKeyWith(base as string, vary, req.headers);
  };

  const privacy = onMethod?.privacy ?? onClass?.privacy;
  if (privacy === 'private' && !keyFn && !vary.some((h) => CREDENTIALS.includes(h))) {
    throw new StampedeConfigError(
      `${name}: @CacheRoute({ privacy: 'private' }) needs a key that names the caller: ` +
        `vary: ['authorization'] (or ['cookie']), or key: (req) => \`user:\${...}\`. ` +
        `For a response that is the same for every caller, use privacy: 'public'.`,
    );
  }
  // With a privacy option the route answers for the credentials; else vary may name them.
  const uncovered = privacy ? [] : CREDENTIALS.filter((h) => !vary.includes(h));
  const bypasses = (req: RouteRequest) => uncovered.some((h) => req.headers[h] !== undefined);
  const stores = (header: (name: string) => unknown): boolean => {
    const control = String(header('cache-control') ?? '').toLowerCase();
    if (/(^|[\s,])no-store($|[\s,=])/.test(control)) return false;
    if (privacy === 'private') return true;
    if (/(^|[\s,])private($|[\s,=])/.test(control)) return false;
    if (privacy === 'public') return true;
    const cookies = header('set-cookie');
    return cookies === undefined || cookies === null || String(cookies) === '';
  };
  return { name, policy, keyOf, bypasses, stores };
}

function pickPolicy(source: object | undefined): PolicyOptions {
  const picked: Record<string, unknown> = {};
  if (!source) return picked;
  for (const field of POLICY_FIELDS) {
    const value = (source as Record<string, unknown>)[field];
    if (value !== undefined) picked[field] = value;
  }
  return picked;
}

function checkRouteOptions(options: unknown, where: string): void {
  const fail = failAt(where);
  checkPlainObject('options', options, fail, () => `must be an object, got ${String(options)}`);
  const unknown = Object.keys(options as object).filter((k) => !ROUTE_FIELDS.includes(k));
  if (unknown.length > 0) {
    throw new StampedeConfigError(
      `${where}: unknown option(s) ${unknown.join(', ')}; the options are ${ROUTE_FIELDS.join(', ')}`,
    );
  }
  const { key, vary, privacy } = options as CacheRouteOptions;
  checkOneOf(
    'privacy',
    privacy,
    ['public', 'private'],
    fail,
    (got) =>
      `must be 'public' or 'private' (or left out for RFC 9111's shared-cache rules), got ${got}`,
  );
  checkFunction(
    'key',
    key,
    fail,
    () =>
      `must be a function of the request, e.g. (req) => \`product:\${req.params.id}\`, got ${typeof key}`,
  );
  if (vary !== undefined) {
    const bad =
      !Array.isArray(vary) ||
      vary.some((h) => typeof h !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(h));
    if (bad) {
      throw new StampedeConfigError(
        `${where}: vary must be an array of request header names, e.g. ['accept-language'], got ${JSON.stringify(vary)}`,
      );
    }
  }
}

/** `@Res()` or `@Next()` without passthrough: Nest then leaves the response to the handler. */
function responseWriter(controller: Type, methodName: string): string | undefined {
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, methodName) ?? {}) as Record<
    string,
    unknown
  >;
  const types = Object.keys(args).map((k) => Number(k.split(':')[0]));
  const passthrough = !!Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, controller, methodName);
  if (passthrough) return undefined;
  if (types.includes(RouteParamtypes.RESPONSE)) return '@Res()';
  if (types.includes(RouteParamtypes.NEXT)) return '@Next()';
  return undefined;
}
