import { parseDlqArgs, UsageError } from './dlq-cli';

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
  ])('%j is a usage error: %s', (argv, message) => {
    expect(() => parseDlqArgs(argv, env)).toThrow(UsageError);
    expect(() => parseDlqArgs(argv, env)).toThrow(message);
  });
});
