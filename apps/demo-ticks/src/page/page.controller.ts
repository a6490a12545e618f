import {
  applyDecorators,
  Controller,
  Get,
  Header,
  HttpCode,
  Inject,
  MessageEvent,
  Query,
  Req,
  Sse,
} from '@nestjs/common';
import { Observable } from 'rxjs';
import { parseIntervalParam, parseSymbolParam } from '../http/symbols.controller';
import { PageResponse, TicksLiveFeed } from './live-feed';
import { PageAssets, PageFileName } from './page-assets';

/**
 * The page's Content-Security-Policy: scripts, styles and connections from this origin only, no
 * inline script or style (the page sets every value as text, never as markup), no plugins, no
 * `<base>`, no framing, no form posts.
 */
export const PAGE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'none'",
].join('; ');

/** The headers of the page and its files. */
export const PageHeaders = (): MethodDecorator =>
  applyDecorators(
    Header('Content-Security-Policy', PAGE_CSP),
    Header('X-Content-Type-Options', 'nosniff'),
    Header('Referrer-Policy', 'no-referrer'),
    Header('X-Frame-Options', 'DENY'),
    Header('Cache-Control', 'no-cache'),
  );

/**
 * GET / (the ticks page), its files under /_/assets/ (the page's icon among them, so that the
 * policy's `img-src 'self'` allows it), and its live events on /_/events (server-sent events, see
 * TicksLiveFeed). GET /favicon.ico, which browsers ask for when a page names no icon (the JSON
 * endpoints), answers 204 No Content rather than 404.
 */
@Controller()
export class PageController {
  constructor(
    @Inject(PageAssets) private readonly assets: PageAssets,
    @Inject(TicksLiveFeed) private readonly feed: TicksLiveFeed,
  ) {}

  @Get()
  @PageHeaders()
  @Header('Content-Type', 'text/html; charset=utf-8')
  index(): string {
    return this.file('index.html');
  }

  @Get('_/assets/ticks-page.js')
  @PageHeaders()
  @Header('Content-Type', 'text/javascript; charset=utf-8')
  script(): string {
    return this.file('ticks-page.js');
  }

  @Get('_/assets/ticks-page.css')
  @PageHeaders()
  @Header('Content-Type', 'text/css; charset=utf-8')
  style(): string {
    return this.file('ticks-page.css');
  }

  @Get('_/assets/favicon.svg')
  @PageHeaders()
  @Header('Content-Type', 'image/svg+xml')
  icon(): string {
    return this.file('favicon.svg');
  }

  @Get('favicon.ico')
  @HttpCode(204)
  @Header('Cache-Control', 'max-age=86400')
  noIcon(): void {}

  @Get('_/assets/lightweight-charts.js')
  @PageHeaders()
  @Header('Content-Type', 'text/javascript; charset=utf-8')
  charts(): string {
    return this.file('lightweight-charts.js');
  }

  /** `symbol` may be left out (prices and stats only, until the page picks one); 400 when invalid. */
  @Sse('_/events')
  events(
    @Query('symbol') symbol: unknown,
    @Query('interval') interval: unknown,
    @Req() request: { res?: PageResponse },
  ): Observable<MessageEvent> {
    const candleInterval = parseIntervalParam(interval);
    const chosen = symbol === undefined || symbol === '' ? undefined : parseSymbolParam(symbol);
    // The response (Express's `req.res`), so that shutdown can wait for it to close.
    return this.feed.events(chosen, candleInterval, request.res);
  }

  private file(name: PageFileName): string {
    return this.assets.get(name);
  }
}
