import { fork } from 'node:child_process';
import { join } from 'node:path';
import { ConfigService } from '@nestjs/config';
import { Redis } from 'ioredis';
import { configToken } from '../src/config/ticks-config.module';
import { startTicksApp, TicksApp } from '../src/ticks-app.factory';
import {
  deleteKeys,
  MAIN_TS,
  randomPrefix,
  REDIS_URL,
  REGISTER_TS,
  testConfig,
  testEnv,
} from './support/helpers';

const prefix = randomPrefix('config');
const COLLECTOR_MAIN_TS = join(__dirname, '..', 'src', 'collector.main.ts');

/** Runs an entry file with `env`; resolves with its exit code and stderr. */
function run(
  file: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = fork(file, [], {
      execArgv: ['-r', REGISTER_TS],
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stderr }));
  });
}

jest.setTimeout(120_000);

describe('configuration', () => {
  it.each([
    ['the app', MAIN_TS, 'demo-ticks'],
    ['the collector', COLLECTOR_MAIN_TS, 'demo-ticks collector'],
  ])(
    '%s stops at start-up on a bad value, naming the variable, the value and what is allowed',
    async (_, file, name) => {
      const { code, stderr } = await run(
        file,
        testEnv(prefix, { PORT: 'eighty', COLLECTOR_RATE: '0' }),
      );
      expect(code).toBe(1);
      expect(stderr).toBe(
        `${name}: PORT must be a whole number from 0 to 65535 (got "eighty"); ` +
          'COLLECTOR_RATE must be a whole number from 1 to 1000000 (got "0")\n',
      );
    },
  );

  it.each([
    ['the app', MAIN_TS],
    ['the collector', COLLECTOR_MAIN_TS],
  ])(
    '%s stops at start-up on a REDIS_URL that is no URL, printing it without its password',
    async (_, file) => {
      const password = `pw-${prefix}`;
      // Port 99999 is no port: the Redis client refuses the URL, and its error quotes it.
      const { code, stderr } = await run(
        file,
        testEnv(prefix, {
          REDIS_URL: `redis://default:${password}@127.0.0.1:99999`,
          LOG_LEVEL: 'error',
        }),
      );
      expect(code).toBe(1);
      expect(stderr).toContain('redis://***@127.0.0.1:99999');
      expect(stderr).not.toContain(password);
    },
  );

  describe('in the app', () => {
    let ticks: TicksApp;
    let redis: Redis;

    beforeAll(async () => {
      redis = new Redis(REDIS_URL);
      ticks = await startTicksApp(testConfig(prefix, { CLAIM_COUNT: '250' }));
    });

    afterAll(async () => {
      await ticks?.close();
      await deleteKeys(redis, prefix);
      await redis.quit();
    });

    it('each namespace is registered with ConfigModule and readable through ConfigService', () => {
      const config = ticks.app.get(ConfigService);
      expect(config.get('consumer.stream')).toBe(`${prefix}ticks`);
      expect(config.get('consumer.claim.count')).toBe(250);
      expect(config.get('limits')).toEqual(ticks.config.limits);
      expect(ticks.app.get(configToken('redis'))).toEqual({ url: REDIS_URL });
      for (const name of ['redis', 'consumer', 'candles', 'http', 'limits', 'collector', 'logging'])
        expect(config.get(name)).toBeDefined();
      // process.env is neither read nor written by ConfigModule here
      expect(config.get('TICKS_STREAM')).toBeUndefined();
    });

    it('the server gets the claim options', () => {
      expect(ticks.server.options.claim).toEqual({
        minIdleMs: 30_000,
        intervalMs: 100,
        count: 250,
      });
    });
  });
});
