/*
 * The framework floor of the redirect benchmark: Fastify alone (no Nest), answering GET /:code
 * with the same 302 as the shortener, from an in-process map (BARE_TARGETS: code -> URL, JSON).
 */
import Fastify from 'fastify';

async function main(): Promise<void> {
  const targets = new Map(
    Object.entries(JSON.parse(process.env.BARE_TARGETS ?? '{}') as Record<string, string>),
  );
  const app = Fastify();
  app.get('/health', async () => ({ status: 'ok' }));
  app.get<{ Params: { code: string } }>('/:code', (request, reply) => {
    const url = targets.get(request.params.code);
    if (url === undefined) return reply.code(404).send({ statusCode: 404, error: 'Not Found' });
    return reply.redirect(url, 302);
  });
  await app.listen({
    port: Number(process.env.PORT ?? 3000),
    host: process.env.HOST ?? '127.0.0.1',
  });
  process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
