import type { FastifyHttpOptions } from 'fastify';
import type { Server } from 'node:http';
import { parseShortenerEnv } from '../../apps/demo-shortener/src/config';
import { fastifyOptions } from '../../apps/demo-shortener/src/http/fastify-options';

/** What the bare servers of the redirect benchmark read from their environment. */
export function bareTargets(env: NodeJS.ProcessEnv): {
  port: number;
  host: string;
  targets: Map<string, string>;
  /**
   * Fastify's server options: its defaults, or with BARE_SERVER_OPTIONS=app the shortener's own
   * (its default timeouts, keep-alive, body limit, router and error options).
   */
  serverOptions: FastifyHttpOptions<Server>;
} {
  const targets = JSON.parse(env.BARE_TARGETS ?? '{}') as Record<string, string>;
  return {
    port: Number(env.PORT ?? 3000),
    host: env.HOST ?? '127.0.0.1',
    targets: new Map(Object.entries(targets)),
    serverOptions:
      env.BARE_SERVER_OPTIONS === 'app' ? fastifyOptions(parseShortenerEnv({}).http) : {},
  };
}
