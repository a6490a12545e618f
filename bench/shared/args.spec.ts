import { flag, helpText, list, num, parseOptions, str, UsageError } from './args';

const SPEC = {
  rate: num(100, 'messages per second'),
  warmup: num(2, 'seconds of warm-up', { min: 0 }),
  limit: num(undefined, 'optional cap'),
  modes: list(['fixed', 'drain'], ['drain'], 'modes'),
  json: str(undefined, 'JSON output', '<file>'),
  keep: flag('keep the keys'),
};

describe('parseOptions', () => {
  it('reads numbers, lists, strings and booleans, with `--flag value` and `--flag=value`', () => {
    const v = parseOptions(SPEC, ['--rate=250', '--modes', 'fixed,drain', '--json', 'o', '--keep']);
    expect(v).toMatchObject({ rate: 250, modes: ['fixed', 'drain'], json: 'o', keep: true });
    // The rest: the spec's defaults.
    expect(v).toMatchObject({ help: false, warmup: 2, limit: undefined });
    expect(parseOptions(SPEC, []).modes).toEqual(['drain']);
  });

  it('accepts 0 only where the spec allows it', () => {
    expect(parseOptions(SPEC, ['--warmup', '0']).warmup).toBe(0);
    expect(() => parseOptions(SPEC, ['--rate', '0'])).toThrow(/--rate needs a number > 0/);
    expect(() => parseOptions(SPEC, ['--rate', 'fast'])).toThrow(UsageError);
  });

  it('rejects unknown flags and values outside the choices', () => {
    expect(() => parseOptions(SPEC, ['--nope'])).toThrow(UsageError);
    expect(() => parseOptions(SPEC, ['--modes', 'fixed,max'])).toThrow(
      /one or more of fixed,drain/,
    );
    expect(() => parseOptions(SPEC, ['--json'])).toThrow(UsageError);
    expect(parseOptions(SPEC, ['--help']).help).toBe(true);
  });
});

describe('helpText', () => {
  it('lists every flag with its help, choices and default', () => {
    const text = helpText('npm run bench:x', 'What it does.', SPEC);
    expect(text).toContain('usage: npm run bench:x [options]');
    expect(text).toContain('--rate <number>\n      messages per second (default 100)');
    expect(text).toContain('--modes <a,b,...>\n      modes [fixed, drain] (default drain)');
    expect(text).toContain('--json <file>');
    expect(text).toMatch(/--keep\n {6}keep the keys/);
  });
});
