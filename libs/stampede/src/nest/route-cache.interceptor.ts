import {
  CallHandler,
  ExecutionContext,
  Inject,
  Injectable,
  NestInterceptor,
  OnModuleInit,
  Optional,
  StreamableFile,
  Type,
} from '@nestjs/common';
import { INTERCEPTORS_METADATA, PATH_METADATA } from './nest-internals';
import { DiscoveryService, HttpAdapterHost, MetadataScanner, ModulesContainer } from '@nestjs/core';
import { defer, lastValueFrom, Observable, of } from 'rxjs';
import { StampedeConfigError } from '../core/errors';
import { LoadContext, runInLoadContext } from '../core/load-context';
import { CACHE_STATUS_HEADER, STAMPEDE_ROUTE } from './route-cache.constants';
import type { RouteRequest } from './route-cache.options';
import { compileRoutePlan, RouteHandler, RoutePlan } from './route-cache.plan';
import { StampedeService } from './stampede.service';

/** Set on a request by the first StampedeInterceptor that serves it (it may be bound twice). */
const SERVED = Symbol('stampede:served');

/** Apps (by their modules container) whose controllers were checked at start-up. */
const checkedApps = new WeakSet<ModulesContainer>();

/**
 * Caches the responses of GET (and HEAD) routes marked with `@CacheRoute()` or with the stampede
 * decorators, through the same flow as the decorated provider methods: the handler is the
 * loader, `Controller.method` the name. Other requests, routes and contexts pass through.
 * Bind it with `@UseInterceptors(StampedeInterceptor)` (which `@CacheRoute()` does) or globally
 * with `APP_INTERCEPTOR`; bound twice, it serves a request once.
 */
@Injectable()
export class StampedeInterceptor implements NestInterceptor, OnModuleInit {
  private readonly plans = new Map<Type, Map<RouteHandler, RoutePlan | null>>();
  private readonly stampede: StampedeService;

  constructor(
    // Optional, so that a module that cannot inject it gets onModuleInit's error naming the
    // route and the fix, instead of Nest's UnknownDependenciesException.
    @Optional() @Inject(StampedeService) stampede: StampedeService | undefined,
    private readonly modules: ModulesContainer,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.stampede = stampede as StampedeService;
  }

  /** Checks every marked route of the app, so a bad option stops the start-up. */
  onModuleInit(): void {
    if (!this.stampede) throw this.withoutService();
    if (checkedApps.has(this.modules)) return;
    checkedApps.add(this.modules);
    const scanner = new MetadataScanner();
    for (const wrapper of new DiscoveryService(this.modules).getControllers()) {
      const controller = wrapper.metatype as Type | null;
      if (typeof controller !== 'function' || !controller.prototype) continue;
      const prototype = controller.prototype as Record<string, unknown>;
      for (const methodName of scanner.getAllMethodNames(prototype)) {
        const handler = prototype[methodName];
        if (typeof handler === 'function') {
          this.planFor(controller, handler as RouteHandler, methodName);
        }
      }
    }
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    const http = context.switchToHttp();
    const req = http.getRequest<RouteRequest & { [SERVED]?: true }>();
    if ((req.method !== 'GET' && req.method !== 'HEAD') || req[SERVED]) return next.handle();
    const handler = context.getHandler() as RouteHandler;
    const plan = this.planFor(context.getClass(), handler, handler.name);
    if (!plan) return next.handle();
    req[SERVED] = true;
    if (plan.bypasses(req)) return next.handle();
    const res: unknown = http.getResponse();
    const key = plan.keyOf(req);
    const call: RouteCall = { plan, res, next, answered: false };
    // The handler reaches the load's context (adaptive TTL) through currentLoadContext().
    const loader = (_signal: AbortSignal, context: LoadContext) =>
      runInLoadContext(context, () => this.load(call));
    // A fresh value of the in-process tier is the response at once: no flow, no promise.
    const held = this.stampede.fresh(key, loader, plan.policy, plan.name);
    if (held) {
      call.answered = true;
      this.adapterHost.httpAdapter.setHeader(res, CACHE_STATUS_HEADER, 'hit');
      return of(held.v);
    }
    return defer(() => this.serve(call, key, loader));
  }

  /** The error for an instance created in a module without StampedeService: names its routes. */
  private withoutService(): StampedeConfigError {
    const host = [...this.modules.values()].find((module) =>
      [...module.injectables.values(), ...module.providers.values()].some(
        (wrapper) => wrapper.instance === this,
      ),
    );
    const moduleName = host?.metatype?.name ?? 'its module';
    const fix =
      `make StampedeModule global (StampedeModule.forRoot({ ..., isGlobal: true })), or import ` +
      `in ${moduleName} the module that imports StampedeModule.forRoot() and exports it.`;
    const scanner = new MetadataScanner();
    for (const wrapper of host?.controllers.values() ?? []) {
      const controller = wrapper.metatype as Type | null;
      if (typeof controller !== 'function' || !controller.prototype) continue;
      const prototype = controller.prototype as Record<string, object>;
      for (const methodName of scanner.getAllMethodNames(prototype)) {
        const handler = prototype[methodName];
        if (Reflect.getMetadata(PATH_METADATA, handler) === undefined) continue;
        const marked =
          Reflect.getMetadata(STAMPEDE_ROUTE, handler) ||
          Reflect.getMetadata(STAMPEDE_ROUTE, controller)
            ? '@CacheRoute'
            : bindsInterceptor(handler) || bindsInterceptor(controller)
              ? 'StampedeInterceptor bound'
              : undefined;
        if (marked) {
          return new StampedeConfigError(
            `${controller.name}.${methodName} has ${marked}, but ${moduleName} cannot inject StampedeService: ${fix}`,
          );
        }
      }
    }
    return new StampedeConfigError(
      `StampedeInterceptor in ${moduleName} cannot inject StampedeService: ${fix}`,
    );
  }

  private planFor(controller: Type, handler: RouteHandler, methodName: string): RoutePlan | null {
    let byHandler = this.plans.get(controller);
    if (!byHandler) this.plans.set(controller, (byHandler = new Map()));
    let plan = byHandler.get(handler);
    if (plan === undefined) {
      plan =
        compileRoutePlan(controller, methodName, handler, (options, where) =>
          this.stampede.resolve(options, where),
        ) ?? null;
      byHandler.set(handler, plan);
    }
    return plan;
  }

  /**
   * The route's loader: runs the handler. The engine also calls the loader of a request it
   * answered from the cache, to refresh the value in the background (XFetch). Such a request's
   * call settles in the same turn of the event loop (only microtasks are left): after one turn,
   * `answered` tells them apart.
   */
  private async load(call: RouteCall): Promise<unknown> {
    const { plan, res, next } = call;
    await new Promise<void>((resolve) => setImmediate(resolve));
    const inBackground = call.answered;
    const value: unknown = await lastValueFrom(next.handle(), { defaultValue: undefined });
    refuseUnstorable(value, plan.name);
    if (!inBackground) call.own = { value };
    // undefined is neither stored nor, below, served to the requests joined to this load.
    const adapter = this.adapterHost.httpAdapter;
    return plan.stores((name) => adapter.getHeader(res, name)) ? value : undefined;
  }

  private async serve(
    call: RouteCall,
    key: string,
    loader: (signal: AbortSignal, context: LoadContext) => Promise<unknown>,
  ): Promise<unknown> {
    const { plan, res, next } = call;
    const adapter = this.adapterHost.httpAdapter;
    try {
      const value = await this.stampede.run(key, loader, plan.policy, plan.name);
      if (call.own) {
        adapter.setHeader(res, CACHE_STATUS_HEADER, 'miss');
        return call.own.value;
      }
      if (value === undefined) {
        // Joined a load whose response was not stored (it was another caller's): run our own.
        const mine: unknown = await lastValueFrom(next.handle(), { defaultValue: undefined });
        adapter.setHeader(res, CACHE_STATUS_HEADER, 'miss');
        return mine;
      }
      adapter.setHeader(res, CACHE_STATUS_HEADER, 'hit');
      return value;
    } finally {
      call.answered = true;
    }
  }
}

/** One request of a cached route. */
interface RouteCall {
  plan: RoutePlan;
  res: unknown;
  next: CallHandler;
  /** The request has its response (the loader then runs in the background only). */
  answered: boolean;
  /** What this request's handler returned, if it ran for this request. */
  own?: { value: unknown };
}

/** `@UseInterceptors(StampedeInterceptor)` (or an instance or subclass of it) on a class or method. */
export function bindsInterceptor(target: object): boolean {
  const bound = (Reflect.getMetadata(INTERCEPTORS_METADATA, target) ?? []) as unknown[];
  return bound.some(
    (i) =>
      i === StampedeInterceptor ||
      i instanceof StampedeInterceptor ||
      (typeof i === 'function' && i.prototype instanceof StampedeInterceptor),
  );
}

/** Values are stored as JSON: bytes and streams would come back as something else. */
function refuseUnstorable(value: unknown, name: string): void {
  let what: string | undefined;
  if (value instanceof StreamableFile) what = 'a StreamableFile';
  else if (value instanceof Uint8Array || value instanceof ArrayBuffer) what = 'bytes';
  else if (typeof (value as { pipe?: unknown } | null)?.pipe === 'function') what = 'a stream';
  if (what) {
    throw new StampedeConfigError(
      `${name} returned ${what}, which cannot be cached (cached values are stored as JSON): ` +
        `remove @CacheRoute and the stampede decorators from this route, or return plain data.`,
    );
  }
}
