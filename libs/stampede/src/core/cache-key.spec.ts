import { StampedeKeyError } from './errors';
import { methodKey, serializeArgs } from './cache-key';

describe('serializeArgs', () => {
  it('is stable under object key order', () => {
    expect(serializeArgs([{ a: 1, b: { c: 2, d: 3 } }])).toBe(
      serializeArgs([{ b: { d: 3, c: 2 }, a: 1 }]),
    );
  });

  it('tells apart values that JSON would merge', () => {
    const forms = [
      [1],
      ['1'],
      [undefined],
      [null],
      ['null'],
      [1n],
      [new Date(0)],
      [new Date(0).toISOString()],
      [[1, 2]],
      ['1,2'],
      [1, 2],
      [new Set([1])],
      [new Map([[1, 1]])],
      [{}],
      [[]],
    ].map(serializeArgs);
    expect(new Set(forms).size).toBe(forms.length);
  });

  it('orders Sets and Maps by content', () => {
    expect(serializeArgs([new Set([2, 1])])).toBe(serializeArgs([new Set([1, 2])]));
    expect(
      serializeArgs([
        new Map([
          ['b', 1],
          ['a', 2],
        ]),
      ]),
    ).toBe(
      serializeArgs([
        new Map([
          ['a', 2],
          ['b', 1],
        ]),
      ]),
    );
  });

  it('refuses functions, symbols and cycles with a message that says what to do', () => {
    expect(() => serializeArgs([() => 1])).toThrow(StampedeKeyError);
    expect(() => serializeArgs([Symbol('x')])).toThrow(/pass a key function/);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => serializeArgs([cyclic])).toThrow(/cycle/);
  });

  it('allows the same object twice when it is not a cycle', () => {
    const shared = { a: 1 };
    expect(serializeArgs([[shared, shared]])).toBe('[{"a":1},{"a":1}]');
  });

  it('methodKey is Class.method: plus the arguments', () => {
    expect(methodKey('UserService', 'find', [42, 'x'])).toBe('UserService.find:42,"x"');
    expect(methodKey('UserService', 'all', [])).toBe('UserService.all:');
  });
});
