import { escapeControl, jsonText, parseDlqArgs, UsageError } from './dlq-cli';

const env = { REDIS_URL: 'redis://env:6379' };

describe('dlq command line', () => {
  it('list, with defaults and options', () => {
    expect(parseDlqArgs(['list', 'orders'], env)).toEqual({
      command: 'list',
      stream: 'orders',
      ids: [],
      count: 100,
      redis: 'redis://env:6379',
      json: false,
    });
    expect(
      parseDlqArgs(
        ['list', 'orders', '--count', '5', '--after', '1-0', '--json', '--redis', 'redis://x:1'],
        env,
      ),
    ).toEqual({
      command: 'list',
      stream: 'orders',
      ids: [],
      count: 5,
      after: '1-0',
      redis: 'redis://x:1',
      json: true,
    });
    expect(parseDlqArgs(['list', 'orders'], {})).toMatchObject({ redis: 'redis://127.0.0.1:6379' });
  });

  it('show, replay and drop', () => {
    expect(parseDlqArgs(['show', 'orders', '1-0'], env)).toMatchObject({ ids: ['1-0'] });
    expect(parseDlqArgs(['replay', 'orders', '1-0', '2-0', '--dlq', 'dead'], env)).toMatchObject({
      command: 'replay',
      ids: ['1-0', '2-0'],
      deadLetterStream: 'dead',
    });
    expect(parseDlqArgs(['drop', 'orders', '--all'], env)).toMatchObject({ ids: 'all' });
    expect(parseDlqArgs(['drop', 'orders', '--all', '--force'], env)).toMatchObject({
      force: true,
    });
    expect(parseDlqArgs(['replay', 'orders', '1-0'], env)).not.toHaveProperty('force');
    expect(parseDlqArgs(['--help'], env)).toBe('help');
    expect(parseDlqArgs(['list', '-h'], env)).toBe('help');
  });

  it.each([
    [[], 'Missing command'],
    [['frobnicate', 'orders'], 'Unknown command "frobnicate"'],
    [['list'], '"list" needs a stream'],
    [['list', 'orders', '1-0'], 'takes only a stream'],
    [['list', 'orders', '--count', '0'], '--count must be a positive integer'],
    [['list', 'orders', '--count', 'x'], '--count must be a positive integer'],
    [['list', 'orders', '--after', 'x'], '--after "x" is not a dead-letter id'],
    [['list', 'orders', '--all'], '--all goes with "replay" and "drop" only'],
    [['show', 'orders'], 'one dead-letter id'],
    [['show', 'orders', '1-0', '2-0'], 'one dead-letter id'],
    [['replay', 'orders'], 'needs dead-letter ids or --all'],
    [['replay', 'orders', '1-0', '--all'], 'not both'],
    [['drop', 'orders', 'nope'], '"nope" is not a dead-letter id'],
    [['drop', 'orders', '1-0', '--count', '2'], '--count and --after go with "list" only'],
    [['list', 'orders', '--bogus'], "Unknown option '--bogus'"],
    [['show', 'orders', '1-0', '--force'], '--force goes with "replay" and "drop" only'],
  ])('%j is a usage error: %s', (argv, message) => {
    expect(() => parseDlqArgs(argv, env)).toThrow(UsageError);
    expect(() => parseDlqArgs(argv, env)).toThrow(message);
  });
});

describe('escapeControl', () => {
  it.each([
    ['\x1b[2J\x1b[H', '\\x1b[2J\\x1b[H'],
    ['a\rb\nc\td', 'a\\rb\\nc\\td'],
    ['\x00\x07\x08\x1f\x7f', '\\x00\\x07\\x08\\x1f\\x7f'],
    ['\u009b31m \u0085', '\\x9b31m \\x85'],
    ['abc\u202edcba\u2066', 'abc\\u202edcba\\u2066'],
  ])('%j is shown as %s', (text, shown) => expect(escapeControl(text)).toBe(shown));

  it('keeps printable text, backslashes and non-Latin letters as they are', () => {
    const text = 'orders {"n":1} C:\\tmp é 漢字 🙂 \u00a0';
    expect(escapeControl(text)).toBe(text);
  });

  it('is idempotent: escaped text has nothing left to escape', () => {
    const once = escapeControl('\x1b]0;title\x07\r\u009b');
    expect(escapeControl(once)).toBe(once);
  });
});

describe('jsonText', () => {
  it('the same JSON value, with no raw DEL, C1 or bidirectional control', () => {
    const value = { data: '\x1b[2J\r\x7f\u009b\u202e', n: 1 };
    const text = jsonText(value);
    expect(JSON.parse(text)).toEqual(value);
    // eslint-disable-next-line no-control-regex
    expect(text.replace(/\n/g, '')).not.toMatch(/[\x00-\x1f\x7f-\x9f\u202e]/);
  });
});
