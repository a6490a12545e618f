import { Controller, Get, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { loadPageAssets, PageAsset, PageFile } from './page-assets';
import { PAGE_SECURITY_HEADERS } from './security-headers';

/**
 * The shortener's page: `GET /` and its files under `/_/` (a path no code can take: `_` is not
 * Base62), all with the strict Content-Security-Policy; its icon is one of them, so that the
 * policy's `img-src 'self'` allows it. The files are read once, at start-up. `GET /favicon.ico`,
 * which browsers ask for when a page names no icon (the JSON endpoints), answers 204 No Content
 * (no code has a dot, so it is not a short link either).
 */
@Controller()
export class PageController {
  private readonly assets = loadPageAssets();

  @Get()
  index(@Req() request: FastifyRequest, @Res() reply: FastifyReply): void {
    this.send('index.html', request, reply);
  }

  @Get('_/page.js')
  script(@Req() request: FastifyRequest, @Res() reply: FastifyReply): void {
    this.send('page.js', request, reply);
  }

  @Get('_/page.css')
  style(@Req() request: FastifyRequest, @Res() reply: FastifyReply): void {
    this.send('page.css', request, reply);
  }

  @Get('_/favicon.svg')
  icon(@Req() request: FastifyRequest, @Res() reply: FastifyReply): void {
    this.send('favicon.svg', request, reply);
  }

  @Get('favicon.ico')
  noIcon(@Res() reply: FastifyReply): void {
    void reply.status(204).header('Cache-Control', 'max-age=86400').send();
  }

  private send(name: PageFile, request: FastifyRequest, reply: FastifyReply): void {
    const asset: PageAsset = this.assets[name];
    void reply
      .headers(PAGE_SECURITY_HEADERS)
      .header('Cache-Control', 'no-cache')
      .header('ETag', asset.etag);
    if (request.headers['if-none-match'] === asset.etag) {
      void reply.status(304).send();
      return;
    }
    void reply.header('Content-Type', asset.contentType).send(asset.body);
  }
}
