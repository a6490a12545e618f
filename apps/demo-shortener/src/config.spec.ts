import { ConfigModule } from '@nestjs/config';
import { Test } from '@nestjs/testing';
import {
  bindNamespaces,
  cacheConfig,
  ConfigError,
  databaseConfig,
  httpConfig,
  parseDuration,
  parseShortenerEnv,
} from './config';

describe('parseShortenerEnv', () => {
  it('has defaults for everything', () => {
    const config = parseShortenerEnv({});
    expect(config).toMatchObject({
      http: {
        port: 3000,
        host: '0.0.0.0',
        publicBaseUrl: 'http://localhost:3000',
        bodyLimit: 16_384,
        requestTimeoutMs: 10_000,
        connectionTimeoutMs: 30_000,
        keepAliveTimeoutMs: 72_000,
        maxRequestsPerSocket: 0,
      },
      database: {
        url: 'sqlite:./shortener.sqlite',
        table: 'short_urls',
        poolSize: 10,
        statementTimeoutMs: 5000,
        connectTimeoutMs: 5000,
      },
      cache: {
        enabled: true,
        redisUrl: 'redis://127.0.0.1:6379',
        keyPrefix: 'shortener:',
        ttlMs: 600_000,
        missTtlMs: 30_000,
        operationTimeoutMs: 500,
        cooldownMs: 1000,
        connectTimeoutMs: 2000,
      },
      codes: { strategy: 'sequence', snowflakeWorkerId: expect.any(Number) },
      health: { timeoutMs: 1000 },
    });
  });

  it('reads the environment', () => {
    const config = parseShortenerEnv({
      PORT: '8080',
      DATABASE_URL: 'postgres://u@db/x',
      DB_POOL_SIZE: '20',
      DB_STATEMENT_TIMEOUT: '2s',
      CACHE_TTL: '30s',
      MISS_CACHE_TTL: '500ms',
      CODE_STRATEGY: 'Snowflake',
      SNOWFLAKE_WORKER_ID: '7',
      PUBLIC_BASE_URL: 'https://sho.rt/',
      CACHE_ENABLED: 'false',
      REDIS_KEY_PREFIX: '',
      HTTP_REQUEST_TIMEOUT: '1.5s',
    });
    expect(config).toMatchObject({
      http: { port: 8080, publicBaseUrl: 'https://sho.rt', requestTimeoutMs: 1500 },
      database: { url: 'postgres://u@db/x', poolSize: 20, statementTimeoutMs: 2000 },
      cache: { enabled: false, ttlMs: 30_000, missTtlMs: 500, keyPrefix: '' },
      codes: { strategy: 'snowflake', snowflakeWorkerId: 7 },
    });
  });

  it('treats an empty variable as unset (except REDIS_KEY_PREFIX, where "" means no prefix)', () => {
    expect(parseShortenerEnv({ PORT: '', CACHE_TTL: ' ' })).toMatchObject({
      http: { port: 3000 },
      cache: { ttlMs: 600_000 },
    });
  });

  it.each([
    [{ PORT: 'x' }, 'PORT="x" is not valid: expected an integer from 0 to 65535'],
    [{ PORT: '70000' }, 'PORT="70000" is not valid: expected an integer from 0 to 65535'],
    [
      { CODE_STRATEGY: 'uuid' },
      'CODE_STRATEGY="uuid" is not valid: expected one of sequence, hash, snowflake',
    ],
    [{ CACHE_TTL: 'soon' }, 'CACHE_TTL="soon" is not valid: expected a duration above 0'],
    [{ HTTP_REQUEST_TIMEOUT: '0s' }, 'HTTP_REQUEST_TIMEOUT="0s" is not valid: expected a duration'],
    [{ DB_STATEMENT_TIMEOUT: '-1s' }, 'DB_STATEMENT_TIMEOUT="-1s" is not valid'],
    [
      { DATABASE_TABLE: 'a; drop' },
      'DATABASE_TABLE="a; drop" is not valid: expected a plain SQL identifier',
    ],
    [
      { DATABASE_URL: 'oracle://db/x' },
      'DATABASE_URL="oracle://db/x" is not valid: expected sqlite:<file>',
    ],
    [
      { PUBLIC_BASE_URL: 'sho.rt' },
      'PUBLIC_BASE_URL="sho.rt" is not valid: expected an absolute http or https URL',
    ],
    [{ PUBLIC_BASE_URL: 'ftp://sho.rt' }, 'PUBLIC_BASE_URL="ftp://sho.rt" is not valid'],
    [
      { REDIS_URL: 'localhost:6379' },
      'REDIS_URL="localhost:6379" is not valid: expected an absolute redis or rediss URL',
    ],
    [{ CACHE_ENABLED: 'maybe' }, 'CACHE_ENABLED="maybe" is not valid: expected true or false'],
    [
      { SNOWFLAKE_WORKER_ID: '1024' },
      'SNOWFLAKE_WORKER_ID="1024" is not valid: expected an integer from 0 to 1023',
    ],
  ])('names the bad variable, its value and what is allowed: %j', (env, message) => {
    expect(() => parseShortenerEnv(env)).toThrow(ConfigError);
    expect(() => parseShortenerEnv(env)).toThrow(message);
  });

  it('lists every bad variable at once', () => {
    expect(() => parseShortenerEnv({ PORT: 'x', CACHE_TTL: 'soon' })).toThrow(
      /Invalid configuration:\n {2}PORT="x".*\n {2}CACHE_TTL="soon"/,
    );
  });

  it('ignores variables that are not its own', () => {
    expect(() => parseShortenerEnv({ PATH: '', SOMETHING_ELSE: 'x' } as never)).not.toThrow();
  });
});

describe('configuration namespaces', () => {
  it('are injectable by their KEY, per app (bindNamespaces over a parsed configuration)', async () => {
    const config = parseShortenerEnv({ PORT: '8081', DB_POOL_SIZE: '3', CACHE_ENABLED: 'no' });
    const moduleRef = await Test.createTestingModule({
      imports: [ConfigModule.forRoot({ ignoreEnvFile: true, load: bindNamespaces(config) })],
    }).compile();
    expect(moduleRef.get(httpConfig.KEY)).toEqual(config.http);
    expect(moduleRef.get(databaseConfig.KEY)).toMatchObject({ poolSize: 3 });
    expect(moduleRef.get(cacheConfig.KEY)).toMatchObject({ enabled: false });
    await moduleRef.close();
  });
});

describe('parseDuration', () => {
  it('reads ms, s, m and h (a bare number is ms)', () => {
    expect(parseDuration('1500')).toBe(1500);
    expect(parseDuration('1.5s')).toBe(1500);
    expect(parseDuration('2m')).toBe(120_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('soon')).toBeUndefined();
  });

  it('reads days as the stampede options do (one parser)', () => {
    expect(parseDuration('1d')).toBe(86_400_000);
    expect(parseShortenerEnv({ CACHE_TTL: '2d' }).cache.ttlMs).toBe(2 * 86_400_000);
  });
});
