import { ConfigFactory, registerAs } from '@nestjs/config';
import {
  CacheConfig,
  CodesConfig,
  DatabaseConfig,
  HealthConfig,
  HttpConfig,
  parseShortenerEnv,
  ShortenerConfig,
} from './env.schema';

/*
 * The configuration namespaces, for `@Inject(databaseConfig.KEY) db: DatabaseConfig`. As
 * factories they read process.env; the app loads `bindNamespaces(config)` instead, the same
 * namespaces (same tokens) over a configuration parsed once before the app is built (the
 * Fastify adapter needs the HTTP settings before there is a Nest container), so that tests can
 * run several apps with different settings in one process.
 */
export const httpConfig = registerAs('http', (): HttpConfig => parseShortenerEnv().http);
export const databaseConfig = registerAs(
  'database',
  (): DatabaseConfig => parseShortenerEnv().database,
);
export const cacheConfig = registerAs('cache', (): CacheConfig => parseShortenerEnv().cache);
export const codesConfig = registerAs('codes', (): CodesConfig => parseShortenerEnv().codes);
export const healthConfig = registerAs('health', (): HealthConfig => parseShortenerEnv().health);

/** The namespaces over an already parsed configuration (what `ConfigModule.forRoot({ load })` takes). */
export function bindNamespaces(config: ShortenerConfig): ConfigFactory[] {
  return (Object.keys(config) as (keyof ShortenerConfig)[]).map((name) =>
    registerAs(name, () => config[name]),
  );
}
