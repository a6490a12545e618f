import {
  checkBoolean,
  checkFunction,
  checkGiven,
  checkNonEmptyString,
  checkNonNegative,
  checkNumberAtLeast,
  checkOneOf,
  checkPlainObject,
  checkPositiveInteger,
  checkPositiveNumber,
  checkRatio,
  checkString,
  checkWholeNumber,
  type OptionFail,
} from './option-values';

const fail: OptionFail = (option, reason) => {
  throw new Error(`${option}: ${reason}`);
};

type Check = (value: unknown) => void;

const checks: Record<string, [Check, unknown[], [unknown, string][]]> = {
  checkNumberAtLeast: [
    (v) => checkNumberAtLeast('n', v, 30, fail),
    [30, 30.5, 1e9],
    [
      [29, 'n: must be a number >= 30, got 29'],
      [Infinity, 'n: must be a number >= 30, got Infinity'],
      [NaN, 'n: must be a number >= 30, got NaN'],
      ['40', 'n: must be a number >= 30, got 40'],
    ],
  ],
  checkNonNegative: [
    (v) => checkNonNegative('n', v, fail),
    [0, 0.5, 7],
    [
      [-1, 'n: must be a number >= 0, got -1'],
      [null, 'n: must be a number >= 0, got null'],
    ],
  ],
  checkPositiveNumber: [
    (v) => checkPositiveNumber('n', v, fail),
    [0.1, 1, 5000],
    [
      [0, 'n: must be a positive number, got 0'],
      [-Infinity, 'n: must be a positive number, got -Infinity'],
      [Infinity, 'n: must be a positive number, got Infinity'],
      [true, 'n: must be a positive number, got true'],
    ],
  ],
  checkPositiveInteger: [
    (v) => checkPositiveInteger('n', v, fail),
    [1, 1024],
    [
      [0, 'n: must be a positive integer, got 0'],
      [1.5, 'n: must be a positive integer, got 1.5'],
      [Infinity, 'n: must be a positive integer, got Infinity'],
      ['3', 'n: must be a positive integer, got 3'],
    ],
  ],
  checkWholeNumber: [
    (v) => checkWholeNumber('n', v, fail),
    [-3, 0, 12],
    [[2.5, 'n: must be a whole number, got 2.5']],
  ],
  checkRatio: [
    (v) => checkRatio('r', v, fail),
    [0, 0.2, 0.999],
    [
      [1, 'r: must be in [0, 1), got 1'],
      [-0.1, 'r: must be in [0, 1), got -0.1'],
      [NaN, 'r: must be in [0, 1), got NaN'],
    ],
  ],
  checkBoolean: [
    (v) => checkBoolean('b', v, fail),
    [true, false],
    [[1, 'b: must be a boolean, got 1']],
  ],
  checkString: [
    (v) => checkString('s', v, fail),
    ['', 'x'],
    [
      [3, 's: must be a string, got 3'],
      [null, 's: must be a string, got null'],
    ],
  ],
  checkNonEmptyString: [
    (v) => checkNonEmptyString('s', v, fail),
    ['x'],
    [
      ['', 's: must be a non-empty string, got ""'],
      [{ a: 1 }, 's: must be a non-empty string, got {"a":1}'],
    ],
  ],
  checkFunction: [
    (v) => checkFunction('f', v, fail),
    [() => 1, class {}],
    [['dlq', 'f: must be a function, got "dlq"']],
  ],
  checkPlainObject: [
    (v) => checkPlainObject('o', v, fail),
    [{}, { a: 1 }],
    [
      [[], 'o: must be an object, got []'],
      [null, 'o: must be an object, got null'],
      ['x', 'o: must be an object, got "x"'],
    ],
  ],
  checkOneOf: [
    (v) => checkOneOf('k', v, ['memory', 'redis'], fail),
    ['memory', 'redis'],
    [
      ['Redis', `k: must be 'memory' or 'redis', got "Redis"`],
      [1, `k: must be 'memory' or 'redis', got 1`],
    ],
  ],
};

describe.each(Object.entries(checks))('%s', (_name, [check, accepted, refused]) => {
  it('accepts undefined (an option left out) and the values of its kind', () => {
    for (const value of [undefined, ...accepted]) expect(() => check(value)).not.toThrow();
  });

  it.each(refused)('refuses %p, naming the option and the value', (value, message) => {
    expect(() => check(value)).toThrow(new Error(message));
  });
});

describe('checkGiven', () => {
  it('refuses only undefined', () => {
    for (const value of [null, 0, '', false])
      expect(() => checkGiven('g', value, fail)).not.toThrow();
    expect(() => checkGiven('g', undefined, fail)).toThrow(new Error('g: must be given'));
    expect(() => checkGiven('g', undefined, fail, (got) => `must be a name, got ${got}`)).toThrow(
      new Error('g: must be a name, got undefined'),
    );
  });
});

describe('the reason', () => {
  it('can be built from the value as shown, or be a sentence of its own', () => {
    expect(() =>
      checkPositiveNumber(
        'timeout',
        -1,
        fail,
        (got) => `must be a positive number of ms, got ${got}`,
      ),
    ).toThrow('timeout: must be a positive number of ms, got -1');
    expect(() => checkString('keyPrefix', 1, fail, 'must be a string')).toThrow(
      new Error('keyPrefix: must be a string'),
    );
  });

  it('shows a value JSON cannot serialise with String()', () => {
    const cyclic: { self?: unknown } = {};
    cyclic.self = cyclic;
    expect(() => checkString('s', cyclic, fail)).toThrow(
      's: must be a string, got [object Object]',
    );
    expect(() => checkOneOf('k', 10n, ['a', 'b', 'c'], fail)).toThrow(
      `k: must be 'a', 'b' or 'c', got 10`,
    );
  });

  it('is passed to fail, which decides what is thrown', () => {
    class OwnError extends Error {}
    const own: OptionFail = (option, reason) => {
      throw new OwnError(`Invalid option "${option}": ${reason}.`);
    };
    expect(() => checkPositiveInteger('read.count', 0, own)).toThrow(
      new OwnError('Invalid option "read.count": must be a positive integer, got 0.'),
    );
  });
});
