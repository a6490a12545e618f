/*
 * Nest's own ceiling for the redirect benchmark: a Nest app on Fastify with one controller,
 * GET /:code answering the same 302 as the shortener from an in-process map, with @Res() as
 * the shortener's route takes it; no guards, interceptors, pipes, filters, middleware or
 * metrics. Started by the benchmark in a process of its own (PORT, HOST, BARE_TARGETS, and
 * BARE_SERVER_OPTIONS: see bare-targets.ts).
 */
import { Controller, Get, Module, NotFoundException, Param, Res } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply } from 'fastify';
import { bareTargets } from './bare-targets';

const { port, host, targets, serverOptions } = bareTargets(process.env);

@Controller()
class RedirectController {
  @Get('health')
  health(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get(':code')
  redirect(@Param('code') code: string, @Res() reply: FastifyReply): void {
    const url = targets.get(code);
    if (url === undefined) throw new NotFoundException();
    void reply.redirect(url, 302);
  }
}

@Module({ controllers: [RedirectController] })
class BareModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create<NestFastifyApplication>(
    BareModule,
    new FastifyAdapter(serverOptions),
    {
      logger: ['error', 'warn'],
    },
  );
  app.enableShutdownHooks();
  await app.listen(port, host);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
