import { ConfigError, loadConfig, parseDuration } from './config';

describe('loadConfig', () => {
  it('has defaults for everything', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 3000,
      databaseUrl: 'sqlite:./shortener.sqlite',
      databaseTable: 'short_urls',
      dbPoolSize: 10,
      redisUrl: 'redis://127.0.0.1:6379',
      cacheEnabled: true,
      cacheTtlMs: 600_000,
      missCacheTtlMs: 30_000,
      codeStrategy: 'sequence',
      publicBaseUrl: 'http://localhost:3000',
      bodyLimit: 16_384,
    });
  });

  it('reads the environment', () => {
    const config = loadConfig({
      PORT: '8080',
      DATABASE_URL: 'postgres://u@db/x',
      DB_POOL_SIZE: '20',
      CACHE_TTL: '30s',
      MISS_CACHE_TTL: '500ms',
      CODE_STRATEGY: 'Snowflake',
      SNOWFLAKE_WORKER_ID: '7',
      PUBLIC_BASE_URL: 'https://sho.rt/',
      CACHE_ENABLED: 'false',
    });
    expect(config).toMatchObject({
      port: 8080,
      databaseUrl: 'postgres://u@db/x',
      dbPoolSize: 20,
      cacheTtlMs: 30_000,
      missCacheTtlMs: 500,
      codeStrategy: 'snowflake',
      snowflakeWorkerId: 7,
      publicBaseUrl: 'https://sho.rt',
      cacheEnabled: false,
    });
  });

  it.each([
    [{ PORT: 'x' }, /PORT/],
    [{ CODE_STRATEGY: 'uuid' }, /CODE_STRATEGY/],
    [{ CACHE_TTL: 'soon' }, /CACHE_TTL/],
    [{ DATABASE_TABLE: 'a; drop' }, /DATABASE_TABLE/],
    [{ PUBLIC_BASE_URL: 'sho.rt' }, /PUBLIC_BASE_URL/],
    [{ CACHE_ENABLED: 'maybe' }, /CACHE_ENABLED/],
    [{ SNOWFLAKE_WORKER_ID: '1024' }, /SNOWFLAKE_WORKER_ID/],
  ])('names the bad variable in %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('parses durations', () => {
    expect(parseDuration('1500', 'X')).toBe(1500);
    expect(parseDuration('2m', 'X')).toBe(120_000);
    expect(() => parseDuration('0s', 'X')).toThrow(/longer than 0/);
  });
});
