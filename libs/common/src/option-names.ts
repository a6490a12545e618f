import { nearestName } from './nearest-name';

/**
 * The option names of an options object: `true` for a leaf (or a value not looked into, such as
 * ioredis options), a nested object for a group of options whose names are fixed too. Each level
 * is typed against its options interface, so an option added there must be listed here.
 */
export type OptionTree = { [name: string]: true | OptionTree };
export type OptionNames<T> = Record<keyof Required<T>, true | OptionTree>;

/**
 * Refuses an option name that `tree` does not list, at every level it lists: `fail(option,
 * reason)` throws the package's configuration error, the reason naming the nearest valid name
 * (`Did you mean "defaultTtl"?`) or the valid ones. Values that are not plain objects are left to
 * the value checks.
 */
export function checkOptionNames(
  owner: string,
  options: object,
  tree: OptionTree,
  fail: (option: string, reason: string) => never,
  path = '',
): void {
  const names = Object.keys(tree);
  for (const [name, value] of Object.entries(options)) {
    const option = `${path}${name}`;
    const sub = tree[name];
    if (sub === undefined) {
      const near = nearestName(name, names);
      fail(
        option,
        `${owner} has no such option. ` +
          (near !== undefined
            ? `Did you mean "${path}${near}"?`
            : `The options${path ? ` of "${path.slice(0, -1)}"` : ''} are: ${names.join(', ')}.`),
      );
    }
    if (sub !== true && isPlainObject(value))
      checkOptionNames(owner, value, sub, fail, `${option}.`);
  }
}

export function isPlainObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
