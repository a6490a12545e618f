import {
  BadRequestException,
  Body,
  Controller,
  Get,
  HttpCode,
  NotFoundException,
  Param,
  Post,
  Req,
  Res,
} from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Inject } from '@nestjs/common';
import { httpConfig, type HttpConfig } from '../config';
import { ShortenerMetrics } from '../metrics/shortener-metrics';
import { RedirectCounts } from './redirect-counts';
import { ShortenerService } from './shortener.service';
import { SelfAddress } from './self-address';
import { InvalidUrlError, isLookupableCode, validateTargetUrl } from './url-validation';

export interface ShortUrlView {
  code: string;
  shortUrl: string;
  url: string;
  createdAt: string;
}

function notFound(code: string): NotFoundException {
  return new NotFoundException(`No short URL with code "${code.slice(0, 32)}"`);
}

@Controller()
export class UrlsController {
  private readonly self: SelfAddress;

  constructor(
    private readonly shortener: ShortenerService,
    private readonly redirects: RedirectCounts,
    private readonly metrics: ShortenerMetrics,
    @Inject(httpConfig.KEY) http: HttpConfig,
  ) {
    this.self = new SelfAddress({ publicBaseUrl: http.publicBaseUrl, ports: [http.port] });
  }

  /** 201 with the new code; 200 with the existing code when the URL was shortened before. */
  @Post('urls')
  @HttpCode(201)
  async create(
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<ShortUrlView> {
    // The port this request came in on and the name the client used are this app too.
    const origin = { localPort: request.raw.socket?.localPort, hostHeader: request.headers.host };
    let url: string;
    try {
      url = validateTargetUrl(body, (target) => this.self.matches(target, origin));
    } catch (err) {
      if (err instanceof InvalidUrlError) throw new BadRequestException(err.message);
      throw err;
    }
    const { record, created } = await this.shortener.create(url);
    if (!created) reply.status(200);
    return this.view(record);
  }

  @Get('urls/:code')
  async record(@Param('code') code: string): Promise<ShortUrlView> {
    if (!isLookupableCode(code)) throw notFound(code);
    const record = await this.shortener.resolve(code);
    if (!record) throw notFound(code);
    return this.view(record);
  }

  /** The hot path: 302 (not 301, so every visit reaches the shortener) to the stored URL. */
  @Get(':code')
  async redirect(@Param('code') code: string, @Res() reply: FastifyReply): Promise<void> {
    if (!isLookupableCode(code)) throw notFound(code);
    const record = await this.shortener.resolve(code);
    if (!record) throw notFound(code);
    this.metrics.countRedirect();
    this.redirects.count(code);
    void reply.redirect(record.url, 302);
  }

  private view(record: { code: string; url: string; createdAt: string }): ShortUrlView {
    return {
      code: record.code,
      shortUrl: this.shortener.shortUrl(record.code),
      url: record.url,
      createdAt: record.createdAt,
    };
  }
}
