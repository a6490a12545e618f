import { StampedeConfigError } from './errors';
import {
  checkNamespace,
  keyedInNamespace,
  keysOutsideNamespace,
  namespacedBatchLoader,
  namespacedKey,
  namespacedTags,
} from './namespace';

describe('namespace', () => {
  it('puts keys and tags under `<namespace>:`', () => {
    expect(namespacedKey('billing', 'user:42')).toBe('billing:user:42');
    expect(namespacedTags('billing', ['users', 'user:42'])).toEqual([
      'billing:users',
      'billing:user:42',
    ]);
  });

  it('without a namespace: keys and tags as given', () => {
    const tags = ['users'];
    expect(namespacedKey(undefined, 'user:42')).toBe('user:42');
    expect(namespacedTags(undefined, tags)).toBe(tags);
    expect(namespacedTags('billing', undefined)).toBeUndefined();
  });

  it('two namespaces never give the same key for the same user key', () => {
    expect(namespacedKey('a', 'k')).not.toBe(namespacedKey('b', 'k'));
  });

  it.each([[''], ['a{b'], ['}'], [42], [undefined]])('refuses %p with a clear error', (bad) => {
    expect(() => checkNamespace(bad, 'StampedeModule.forFeature')).toThrow(StampedeConfigError);
    expect(() => checkNamespace(bad, 'StampedeModule.forFeature')).toThrow(
      /StampedeModule.forFeature: namespace must be a non-empty string/,
    );
  });

  it('a batch loader of a namespace is given the keys as the caller wrote them, and keys its result back', async () => {
    const asked: string[][] = [];
    const load = namespacedBatchLoader('billing', (keys) => {
      asked.push(keys);
      return { [keys[0]]: 1 }; // a Record, and one key left out
    });
    const result = await load(['billing:a', 'billing:b'], new AbortController().signal);
    expect(asked).toEqual([['a', 'b']]);
    expect(result).toEqual(new Map([['billing:a', 1]]));
    expect(keysOutsideNamespace('n', ['n:x:y'])).toEqual(['x:y']);
    expect(keyedInNamespace('n', new Map([['x', 2]]))).toEqual(new Map([['n:x', 2]]));
  });
});
