import { redactCredentials } from './redacting-logger';

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
