import { methodKey } from '../core/cache-key';
import { StampedeConfigError, StampedeKeyError } from '../core/errors';
import type { StampedePolicy } from '../core/policy';
import { CacheableOptions, extendPolicy } from './stampede.decorators';

/** Metadata key of what @CacheableMany recorded, beside the method's policy. */
export const STAMPEDE_MANY = 'stampede:many';

export interface CacheableManyOptions extends Omit<CacheableOptions, 'key' | 'tags'> {
  /**
   * Cache key of one id (and the method's other arguments). Default: `Class.method:` + the
   * serialized id and other arguments.
   */
  key?: (id: any, ...rest: any[]) => string;
  /** Tags of every value, for `StampedeService.invalidateTags`. */
  tags?: string[];
  /**
   * What the decorated method returns, and so what its callers get: values in the order of the
   * ids (`'array'`, the default; `undefined` where there is none), or a Map by id of the ids that
   * have a value (`'map'`). The method itself may return either.
   */
  returns?: 'array' | 'map';
}

interface ManyMetadata {
  key?: (id: unknown, ...rest: unknown[]) => string;
  returns: 'array' | 'map';
}

/**
 * Caches a method that takes an array of ids (first argument) and loads them all at once, per
 * id: callers get the cached ids from one MGET, and the method runs once with the ids missing
 * (getOrLoadMany), each of them protected as a @Cacheable call is (single-flight, and with
 * @DistLock a lock per id). Stacks with @DistLock, @XFetch and @JitterTtl.
 */
export function CacheableMany(options: CacheableManyOptions = {}): MethodDecorator {
  const { key, returns = 'array', ...policy } = options;
  if (returns !== 'array' && returns !== 'map') {
    throw new StampedeConfigError(
      `@CacheableMany: returns must be 'array' or 'map', got ${String(returns)}`,
    );
  }
  const cache = extendPolicy({ cache: true, ...policy });
  return (target, property, descriptor) => {
    const out = cache(target, property, descriptor) ?? descriptor;
    const many: ManyMetadata = { key, returns };
    Reflect.defineMetadata(STAMPEDE_MANY, many, descriptor.value as object);
    return out;
  };
}

/** What the explorer needs to call a @CacheableMany method through getOrLoadMany. */
export interface ManyRunner {
  runMany<T>(
    keys: readonly string[],
    loadMissing: (keys: string[]) => Promise<Map<string, T>>,
    policy: StampedePolicy,
    name: string,
    tags?: string[],
  ): Promise<(T | undefined)[]>;
}

/** The replacement of a @CacheableMany method, or undefined for a method without it. */
export function wrapMany(
  original: (...args: unknown[]) => unknown,
  stampede: ManyRunner,
  policy: StampedePolicy,
  className: string,
  methodName: string,
): ((this: unknown, ...args: unknown[]) => Promise<unknown>) | undefined {
  const many = Reflect.getMetadata(STAMPEDE_MANY, original) as ManyMetadata | undefined;
  if (!many) return undefined;
  const name = `${className}.${methodName}`;
  return function (this: unknown, ids: unknown, ...rest: unknown[]) {
    if (!Array.isArray(ids)) {
      return Promise.reject(
        new StampedeKeyError(`${name}: a @CacheableMany method takes an array of ids first`),
      );
    }
    let keys: string[];
    try {
      keys = ids.map((id) =>
        many.key ? many.key(id, ...rest) : methodKey(className, methodName, [id, ...rest]),
      );
    } catch (err) {
      return Promise.reject(err);
    }
    const idOf = new Map(keys.map((key, i) => [key, ids[i] as unknown]));
    const loadMissing = async (missing: string[]) => {
      const missingIds = missing.map((key) => idOf.get(key));
      const result = await original.apply(this, [missingIds, ...rest]);
      return byKey(result, missing, missingIds, name);
    };
    const values = stampede.runMany(keys, loadMissing, policy, name, policy.tags);
    if (many.returns === 'array') return values;
    return values.then((list) => {
      const out = new Map<unknown, unknown>();
      ids.forEach((id, i) => {
        if (list[i] !== undefined) out.set(id, list[i]);
      });
      return out;
    });
  };
}

/** The method's result (an array in the order of `ids`, or a Map by id) by cache key. */
function byKey(
  result: unknown,
  keys: string[],
  ids: unknown[],
  name: string,
): Map<string, unknown> {
  const out = new Map<string, unknown>();
  if (Array.isArray(result) && result.length === ids.length) {
    keys.forEach((key, i) => out.set(key, result[i]));
  } else if (result instanceof Map) {
    keys.forEach((key, i) => {
      if (result.has(ids[i])) out.set(key, result.get(ids[i]));
    });
  } else {
    throw new StampedeConfigError(
      `${name}: a @CacheableMany method must return an array of one value per id it was given ` +
        `(${ids.length}), in their order, or a Map by id; got ${
          Array.isArray(result) ? `an array of ${result.length}` : String(result)
        }`,
    );
  }
  return out;
}
