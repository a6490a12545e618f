import { RedactingLogger, redactCredentials } from './redacting-logger';

describe('redactCredentials', () => {
  it.each([
    ['redis://default:s3cret@127.0.0.1:6379', 'redis://***@127.0.0.1:6379'],
    ['rediss://:s3cret@cache.example:6380/2', 'rediss://***@cache.example:6380/2'],
    ['postgres://app:p%40ss@db:5432/test', 'postgres://***@db:5432/test'],
    // A raw `@` in the password: everything up to the host is hidden.
    ['mysql://root:p@ss@db/test', 'mysql://***@db/test'],
    [
      'cache redis://u:a@h1:1, database postgres://v:b@h2/x',
      'cache redis://***@h1:1, database postgres://***@h2/x',
    ],
    ['input: "redis://default:s3cret@127.0.0.1:99999"', 'input: "redis://***@127.0.0.1:99999"'],
  ])('%s', (text, expected) => {
    expect(redactCredentials(text)).toBe(expected);
  });

  it.each([
    'redis://127.0.0.1:6379',
    'sqlite:/tmp/x.db',
    'https://example.com/a@b?c=d@e#f@g',
    'mailto:someone@example.com',
  ])('leaves %s as it is (no user info)', (text) => {
    expect(redactCredentials(text)).toBe(text);
  });
});

describe('RedactingLogger', () => {
  const printed = (log: (logger: RedactingLogger) => void): string => {
    const lines: string[] = [];
    const out = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    const err = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    try {
      log(new RedactingLogger(['log', 'error']));
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
    return lines.join('');
  };

  it('redacts messages, and the stack of an error', () => {
    const text = printed((logger) => {
      logger.log('cache redis://default:pw1@h:6379', 'Ctx');
      logger.error('failed', 'Error: at postgres://u:pw2@db/x', 'Ctx');
    });
    expect(text).toContain('redis://***@h:6379');
    expect(text).toContain('postgres://***@db/x');
    expect(text).not.toMatch(/pw1|pw2/);
  });

  it('logs an error without a stack (it used to throw, killing the process)', () => {
    expect(printed((logger) => logger.error('XREADGROUP failed: UNBLOCKED'))).toContain(
      'XREADGROUP failed: UNBLOCKED',
    );
  });
});
