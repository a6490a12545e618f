import { StampedeConfigError } from './errors';
import type { BatchLoader, BatchResult } from './missing-batch';

/**
 * A namespace puts a feature's keys and tags under `<namespace>:`, so two features that use the
 * same key (`user:42`) or tag (`users`) do not share values or invalidations. The namespaced key
 * is an ordinary key of the configuration: the root service reaches it as `<namespace>:<key>`.
 */
export function checkNamespace(namespace: unknown, where: string): string {
  if (typeof namespace !== 'string' || namespace === '' || /[{}]/.test(namespace)) {
    throw new StampedeConfigError(
      `${where}: namespace must be a non-empty string without { or }, got ${String(namespace)}`,
    );
  }
  return namespace;
}

export function namespacedKey(namespace: string | undefined, key: string): string {
  return namespace === undefined ? key : `${namespace}:${key}`;
}

export function namespacedTags(
  namespace: string | undefined,
  tags: string[] | undefined,
): string[] | undefined {
  return namespace === undefined || tags === undefined
    ? tags
    : tags.map((tag) => `${namespace}:${tag}`);
}

/** The tag every value of a namespace carries (empty tags are refused, so no user tag is it). */
export function namespaceTag(namespace: string): string {
  return `${namespace}:`;
}

/**
 * The tags a value of `namespace` is stamped with: its own under `<namespace>:`, and the
 * namespace's tag, which the namespace's clear() moves on.
 */
export function namespaceStampTags(
  namespace: string | undefined,
  tags: string[] | undefined,
): string[] | undefined {
  if (namespace === undefined) return tags;
  return [namespaceTag(namespace), ...(namespacedTags(namespace, tags) ?? [])];
}

/**
 * The batch loader of a namespace's keys over one of the caller's keys: it is given the keys
 * without `<namespace>:` and its result is keyed back under it.
 */
export function namespacedBatchLoader<T>(namespace: string, load: BatchLoader<T>): BatchLoader<T> {
  return async (keys, signal) =>
    keyedInNamespace(namespace, await load(keysOutsideNamespace(namespace, keys), signal));
}

/** Namespaced keys as the caller gave them (without `<namespace>:`). */
export function keysOutsideNamespace(namespace: string, keys: string[]): string[] {
  const length = namespace.length + 1;
  return keys.map((key) => key.slice(length));
}

/** A batch result by the caller's keys, by namespaced key. */
export function keyedInNamespace<T>(namespace: string, result: BatchResult<T>): Map<string, T> {
  const entries = result instanceof Map ? [...result] : Object.entries(result);
  return new Map(entries.map(([key, value]) => [namespacedKey(namespace, key), value]));
}
