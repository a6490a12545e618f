/*
 * The framework floor of the redirect benchmark: Fastify alone (no Nest), answering
 * GET /:code with the same 302 as the shortener, from an in-process map. Started by the
 * benchmark in a process of its own (PORT, HOST, and BARE_TARGETS: a JSON object code -> URL;
 * BARE_SERVER_OPTIONS=app for the shortener's server options instead of Fastify's defaults).
 */
import Fastify from 'fastify';
import { bareTargets } from './bare-targets';

async function main(): Promise<void> {
  const { port, host, targets, serverOptions } = bareTargets(process.env);
  const app = Fastify(serverOptions);
  app.get('/health', async () => ({ status: 'ok' }));
  app.get<{ Params: { code: string } }>('/:code', (request, reply) => {
    const url = targets.get(request.params.code);
    if (url === undefined) return reply.code(404).send({ statusCode: 404, error: 'Not Found' });
    return reply.redirect(url, 302);
  });
  await app.listen({ port, host });
  process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
