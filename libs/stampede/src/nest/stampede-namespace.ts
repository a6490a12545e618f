import type { OnModuleInit } from '@nestjs/common';
import { checkTags, PolicyOptions, StampedePolicy } from '../core/policy';
import type { BatchLoader } from '../core/missing-batch';
import {
  keyedInNamespace,
  keysOutsideNamespace,
  namespacedBatchLoader,
  namespacedKey,
  namespacedTags,
  namespaceStampTags,
  namespaceTag,
} from '../core/namespace';
import type { Loader } from '../core/stampede-engine';
import type { ManyRunner } from './cacheable-many';
import type {
  InvalidateTagsOptions,
  StampedeService,
  StampedeSetOptions,
} from './stampede.service';

/**
 * The StampedeService of one feature (`StampedeModule.forFeature({ namespace })`): the same
 * store, L1, locks and events as its configuration, with every key and tag under
 * `<namespace>:`. `invalidate('user:42')` drops `<namespace>:user:42` only, and
 * `invalidateTags(['users'])` the values this namespace stamped with `users`.
 */
export class StampedeNamespace implements OnModuleInit {
  private readonly policies = new WeakMap<PolicyOptions, StampedePolicy>();
  private service: StampedeService | undefined;
  private readonly findRoot: () => StampedeService;

  /** `root`: the configuration's service, or how to find it once the app's providers exist. */
  constructor(
    root: StampedeService | (() => StampedeService),
    readonly namespace: string,
  ) {
    this.findRoot = typeof root === 'function' ? root : () => root;
  }

  /** The configuration's service; it reaches this namespace's keys as `<namespace>:<key>`. */
  get root(): StampedeService {
    return (this.service ??= this.findRoot());
  }

  /** A namespace whose configuration is missing stops the start-up. */
  onModuleInit(): void {
    void this.root;
  }

  /**
   * StampedeService.getOrLoad under the namespace. `name` groups the metrics (default
   * `<namespace>:getOrLoad`).
   */
  getOrLoad<T>(
    key: string,
    loader: Loader<T>,
    policy: PolicyOptions = {},
    name = `${this.namespace}:getOrLoad`,
  ): Promise<T> {
    return this.root.run(this.key(key), loader, this.policyFor(policy, 'getOrLoad'), name);
  }

  /**
   * StampedeService.getOrLoadMany under the namespace: `loadMissing` is given the keys as passed
   * here. `name` defaults to `<namespace>:getOrLoadMany`.
   */
  getOrLoadMany<T>(
    keys: readonly string[],
    loadMissing: BatchLoader<T>,
    policy: PolicyOptions = {},
    name = `${this.namespace}:getOrLoadMany`,
  ): Promise<(T | undefined)[]> {
    let resolved: StampedePolicy;
    try {
      resolved = this.policyFor(policy, 'getOrLoadMany');
    } catch (err) {
      return Promise.reject(err);
    }
    return this.root.runMany(
      keys.map((key) => this.key(key)),
      namespacedBatchLoader(this.namespace, loadMissing),
      resolved,
      name,
    );
  }

  /** StampedeService.invalidate of `<namespace>:<key>`. */
  invalidate(key: string): Promise<void> {
    return this.root.invalidate(this.key(key));
  }

  /** StampedeService.invalidateTags of this namespace's tags (`mode: 'soft'` marks them stale). */
  async invalidateTags(tags: string[], options?: InvalidateTagsOptions): Promise<void> {
    const where = `StampedeNamespace(${this.namespace}).invalidateTags`;
    await this.root.invalidateTags(
      namespacedTags(this.namespace, checkTags(tags, where))!,
      options,
    );
  }

  /** StampedeService.get of `<namespace>:<key>`. */
  get<T = unknown>(key: string): Promise<T | undefined> {
    return this.root.get<T>(this.key(key));
  }

  /** StampedeService.set of `<namespace>:<key>`, its tags under the namespace. */
  async set<T>(key: string, value: T, options: StampedeSetOptions = {}): Promise<void> {
    const where = `StampedeNamespace(${this.namespace}).set`;
    const tags = options.tags === undefined ? undefined : checkTags(options.tags, where);
    await this.root.set(this.key(key), value, {
      ...options,
      tags: namespaceStampTags(this.namespace, tags),
    });
  }

  /** The same as `invalidate(key)`. */
  delete(key: string): Promise<void> {
    return this.invalidate(key);
  }

  /** StampedeService.expire of `<namespace>:<key>`. */
  expire(key: string): Promise<void> {
    return this.root.expire(this.key(key));
  }

  /**
   * Drops every value of this namespace, on every instance, and no other: one new version of the
   * namespace's tag, which each of its values carries.
   */
  async clear(): Promise<void> {
    await this.root.invalidateTags([namespaceTag(this.namespace)]);
  }

  /** The key the configuration stores a key of this namespace under. */
  key(key: string): string {
    return namespacedKey(this.namespace, key);
  }

  private policyFor(options: PolicyOptions, method: string): StampedePolicy {
    let policy = this.policies.get(options);
    if (!policy) {
      const where = `StampedeNamespace(${this.namespace}).${method}`;
      const tags = options.tags === undefined ? undefined : checkTags(options.tags, where);
      policy = this.root.resolve(
        { ...options, tags: namespaceStampTags(this.namespace, tags) },
        where,
      );
      this.policies.set(options, policy);
    }
    return policy;
  }
}

/** The runner of a @CacheableMany method whose keys live under `namespace` (if any). */
export function namespacedRunner(runner: ManyRunner, namespace: string | undefined): ManyRunner {
  if (namespace === undefined) return runner;
  return {
    runMany: (keys, loadMissing, policy, name, tags) =>
      runner.runMany(
        keys.map((key) => namespacedKey(namespace, key)),
        async (missing) =>
          keyedInNamespace(namespace, await loadMissing(keysOutsideNamespace(namespace, missing))),
        policy,
        name,
        tags,
      ),
  };
}
