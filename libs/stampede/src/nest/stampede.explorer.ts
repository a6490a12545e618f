import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { methodKey } from '../core/cache-key';
import { StampedeConfigError } from '../core/errors';
import { checkTags } from '../core/policy';
import { STAMPEDE_POLICY } from './stampede.constants';
import type { MethodPolicyMetadata } from './stampede.decorators';
import { StampedeService } from './stampede.service';

const WRAPPED = Symbol('stampede:wrapped');

/**
 * Finds provider methods with stampede decorators at start-up and replaces them, on the
 * instance, by a call through StampedeService. Wrapping the instance (not the prototype)
 * keeps two apps in one process on their own stores.
 */
@Injectable()
export class StampedeExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly stampede: StampedeService,
  ) {}

  onModuleInit(): void {
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
    const wrapped = function (this: unknown, ...args: unknown[]) {
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
    Object.defineProperty(wrapped, 'name', { value: methodName });
    Object.defineProperty(wrapped, WRAPPED, { value: true });
    target[methodName] = wrapped;
  }
}
