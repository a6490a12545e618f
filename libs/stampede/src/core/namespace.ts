import { StampedeConfigError } from './errors';

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
