/*
 * The servers the hit path compares the shortener with, answering GET /:code with the same 302
 * from an in-process map, each started by the benchmark in a process of its own (PORT, HOST,
 * BARE_TARGETS: a JSON object code -> URL, BARE_SERVER: fastify or nest):
 *   fastify  the framework floor: Fastify alone, no Nest;
 *   nest     Nest's own ceiling: a Nest app on Fastify with one controller taking @Res() as the
 *            shortener's route does; no guards, interceptors, pipes, filters, middleware or metrics.
 * BARE_SERVER_OPTIONS=app: the shortener's Fastify server options (its default timeouts,
 * keep-alive, body limit, router and error options) instead of Fastify's defaults.
 * BARE_DEFER=immediate (nest): the route answers after a setImmediate, in a later turn of the
 * event loop, as a server waiting on Redis does; what answering in batches saves.
 */
import type { FastifyReply } from 'fastify';
import { parseShortenerEnv } from '../../apps/demo-shortener/src/config';
import { fastifyOptions } from '../../apps/demo-shortener/src/http/fastify-options';

const env = process.env;
const port = Number(env.PORT ?? 3000);
const host = env.HOST ?? '127.0.0.1';
const targets = new Map(
  Object.entries(JSON.parse(env.BARE_TARGETS ?? '{}') as Record<string, string>),
);
const defer = env.BARE_DEFER === 'immediate';
const serverOptions =
  env.BARE_SERVER_OPTIONS === 'app' ? fastifyOptions(parseShortenerEnv({}).http) : {};

async function fastify(): Promise<void> {
  const app = (await import('fastify')).default(serverOptions);
  app.get('/health', async () => ({ status: 'ok' }));
  app.get<{ Params: { code: string } }>('/:code', (request, reply) => {
    const url = targets.get(request.params.code);
    if (url === undefined) return reply.code(404).send({ statusCode: 404, error: 'Not Found' });
    return reply.redirect(url, 302);
  });
  await app.listen({ port, host });
  process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
}

// Nest is loaded only here: the Fastify floor runs without it.
async function nest(): Promise<void> {
  const { Controller, Get, Module, NotFoundException, Param, Res } = await import('@nestjs/common');
  const { NestFactory } = await import('@nestjs/core');
  const { FastifyAdapter } = await import('@nestjs/platform-fastify');

  @Controller()
  class RedirectController {
    @Get('health')
    health(): { status: 'ok' } {
      return { status: 'ok' };
    }

    @Get(':code')
    redirect(@Param('code') code: string, @Res() reply: FastifyReply): void | Promise<void> {
      if (defer)
        return new Promise((next) => setImmediate(next)).then(() => redirectTo(code, reply));
      redirectTo(code, reply);
    }
  }

  function redirectTo(code: string, reply: FastifyReply): void {
    const url = targets.get(code);
    if (url === undefined) throw new NotFoundException();
    void reply.redirect(url, 302);
  }

  @Module({ controllers: [RedirectController] })
  class BareModule {}

  const app = await NestFactory.create(BareModule, new FastifyAdapter(serverOptions), {
    logger: ['error', 'warn'],
  });
  app.enableShutdownHooks();
  await app.listen(port, host);
}

(env.BARE_SERVER === 'nest' ? nest() : fastify()).catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
