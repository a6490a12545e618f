import { Injectable, OnModuleInit, Type } from '@nestjs/common';
import { DiscoveryService, MetadataScanner, ModuleRef } from '@nestjs/core';
import { type InstanceWrapper, PATH_METADATA } from './nest-internals';
import { methodKey } from '../core/cache-key';
import { StampedeConfigError } from '../core/errors';
import { checkTags } from '../core/policy';
import { wrapMany } from './cacheable-many';
import { STAMPEDE_POLICY } from './stampede.constants';
import type { MethodPolicyMetadata } from './stampede.decorators';
import { bindsInterceptor, StampedeInterceptor } from './route-cache.interceptor';
import { StampedeService } from './stampede.service';

const WRAPPED = Symbol('stampede:wrapped');

/**
 * Finds provider methods with stampede decorators at start-up and replaces them, on the
 * instance, by a call through StampedeService. Wrapping the instance (not the prototype)
 * keeps two apps in one process on their own stores. Controllers are not wrapped: Nest's
 * router holds their methods before onModuleInit, so their routes are cached by
 * StampedeInterceptor, and a decorated route that no interceptor serves stops the start-up.
 */
@Injectable()
export class StampedeExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly stampede: StampedeService,
    private readonly moduleRef: ModuleRef,
  ) {}

  onModuleInit(): void {
    this.checkControllers();
    for (const wrapper of this.discovery.getProviders()) {
      const { instance, metatype } = wrapper;
      if (!instance || typeof instance !== 'object' || !metatype) continue;
      const prototype = Object.getPrototypeOf(instance) as object;
      const methods = this.scanner
        .getAllMethodNames(prototype)
        .filter((name) =>
          Reflect.hasMetadata(STAMPEDE_POLICY, (prototype as Record<string, object>)[name]),
        );
      if (methods.length === 0) continue;
      const className = (metatype as { name?: string }).name || String(wrapper.name);
      if (!wrapper.isDependencyTreeStatic()) {
        throw new StampedeConfigError(
          `${className}.${methods[0]} has a stampede decorator, but ${className} is request-scoped ` +
            `(or depends on a request-scoped provider), so one instance per request would share no cache flow. ` +
            `Move the method to a singleton provider and inject that.`,
        );
      }
      for (const target of this.instancesOf(wrapper)) {
        for (const name of methods) this.wrap(target, className, name);
      }
    }
  }

  /** Stampede decorators on a controller work only through StampedeInterceptor. */
  private checkControllers(): void {
    let global: boolean | undefined;
    for (const wrapper of this.discovery.getControllers()) {
      const controller = wrapper.metatype as Type | null;
      if (typeof controller !== 'function' || !controller.prototype) continue;
      const prototype = controller.prototype as Record<string, object>;
      for (const methodName of this.scanner.getAllMethodNames(prototype)) {
        const handler = prototype[methodName];
        if (!Reflect.hasMetadata(STAMPEDE_POLICY, handler)) continue;
        const name = `${controller.name}.${methodName}`;
        if (Reflect.getMetadata(PATH_METADATA, handler) === undefined) {
          throw new StampedeConfigError(
            `${name} has a stampede decorator but is a controller method that is not a route: ` +
              `StampedeExplorer wraps provider methods only. Move the method to a provider.`,
          );
        }
        if (bindsInterceptor(handler) || bindsInterceptor(controller)) continue;
        if ((global ??= this.servedGlobally())) continue;
        throw new StampedeConfigError(
          `${name} has a stampede decorator, but no StampedeInterceptor serves this route, so it ` +
            `would do nothing (StampedeExplorer wraps provider methods, not routes). Add ` +
            `@CacheRoute() to the route, or @UseInterceptors(StampedeInterceptor) to it or to ` +
            `${controller.name}, or bind the interceptor for the app with ` +
            `{ provide: APP_INTERCEPTOR, useClass: StampedeInterceptor }; or move the cached ` +
            `lookup to a provider method.`,
        );
      }
    }
  }

  /** `APP_INTERCEPTOR` and `app.useGlobalInterceptors()` land in Nest's ApplicationConfig. */
  private servedGlobally(): boolean {
    const { container } = this.moduleRef as unknown as {
      container?: { applicationConfig?: { getGlobalInterceptors(): unknown[] } };
    };
    const config = container?.applicationConfig;
    if (!config) return true; // cannot tell on this Nest version: do not stop the start-up
    return config.getGlobalInterceptors().some((i) => i instanceof StampedeInterceptor);
  }

  private instancesOf(wrapper: InstanceWrapper): object[] {
    if (!wrapper.isTransient) return [wrapper.instance as object];
    return wrapper
      .getStaticTransientInstances()
      .map((entry) => entry?.instance as object | undefined)
      .filter((instance): instance is object => !!instance);
  }

  private wrap(instance: object, className: string, methodName: string): void {
    const target = instance as Record<string, (...args: unknown[]) => unknown>;
    const original = target[methodName];
    // StampedeModule imported by several modules of one app: wrap once.
    if (Object.prototype.hasOwnProperty.call(original, WRAPPED)) return;
    const {
      key: keyOf,
      tags,
      ...meta
    } = Reflect.getMetadata(STAMPEDE_POLICY, original) as MethodPolicyMetadata;
    const name = `${className}.${methodName}`;
    if (tags !== undefined && typeof tags !== 'function') checkTags(tags, name);
    const policy = this.stampede.resolve(
      { ...meta, cache: meta.cache ?? false, tags: typeof tags === 'function' ? undefined : tags },
      name,
    );
    const tagsOf = typeof tags === 'function' ? tags : undefined;
    const stampede = this.stampede;
    const batch = wrapMany(original, stampede, policy, className, methodName);
    const single = function (this: unknown, ...args: unknown[]) {
      let key: string;
      let callTags: string[] | undefined;
      try {
        key = keyOf ? keyOf(...args) : methodKey(className, methodName, args);
        callTags = tagsOf ? checkTags(tagsOf(...args), name) : policy.tags;
      } catch (err) {
        return Promise.reject(err); // the method is async: fail as a rejection, not a throw
      }
      return stampede.run(key, () => original.apply(this, args), policy, name, callTags);
    };
    const wrapped = batch ?? single;
    Object.defineProperty(wrapped, 'name', { value: methodName });
    Object.defineProperty(wrapped, WRAPPED, { value: true });
    target[methodName] = wrapped;
  }
}
