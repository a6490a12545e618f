import { StampedeKeyError } from './errors';

/**
 * A stable text form of method arguments, for cache keys: object keys are sorted, so
 * `{a: 1, b: 2}` and `{b: 2, a: 1}` give the same key; Dates, bigints, Maps, Sets and
 * `undefined` are told apart from strings that look like them. Functions, symbols and cycles
 * are refused with a clear error (give the decorator a `key` function instead).
 */
export function serializeArgs(args: readonly unknown[]): string {
  return args.map((arg) => serialize(arg, new Set())).join(',');
}

/** `Class.method:` followed by the serialized arguments. */
export function methodKey(className: string, methodName: string, args: readonly unknown[]): string {
  return `${className}.${methodName}:${serializeArgs(args)}`;
}

function serialize(value: unknown, seen: Set<object>): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Object.is(value, -0) ? '0' : String(value);
    case 'boolean':
      return String(value);
    case 'undefined':
      return 'undefined';
    case 'bigint':
      return `${value}n`;
    case 'function':
    case 'symbol':
      throw new StampedeKeyError(
        `cannot build a cache key from a ${typeof value} argument; pass a key function, e.g. @Cacheable({ key: (id) => \`user:\${id}\` })`,
      );
  }
  if (value === null) return 'null';
  const obj = value as object;
  if (seen.has(obj)) {
    throw new StampedeKeyError(
      'cannot build a cache key from an argument that contains a cycle; pass a key function',
    );
  }
  seen.add(obj);
  try {
    if (value instanceof Date) return `Date(${value.toISOString()})`;
    if (Array.isArray(value)) return `[${value.map((v) => serialize(v, seen)).join(',')}]`;
    if (value instanceof Map) {
      const entries = [...value.entries()]
        .map(([k, v]) => `${serialize(k, seen)}=>${serialize(v, seen)}`)
        .sort();
      return `Map{${entries.join(',')}}`;
    }
    if (value instanceof Set) {
      return `Set{${[...value]
        .map((v) => serialize(v, seen))
        .sort()
        .join(',')}}`;
    }
    const keys = Object.keys(obj).sort();
    const record = obj as Record<string, unknown>;
    return `{${keys.map((k) => `${JSON.stringify(k)}:${serialize(record[k], seen)}`).join(',')}}`;
  } finally {
    seen.delete(obj);
  }
}
