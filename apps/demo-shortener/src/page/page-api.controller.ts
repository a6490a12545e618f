import { Controller, Get, Header } from '@nestjs/common';
import { StampedeService } from '@nest-redis-resilience/stampede';
import { ShortenerMetrics } from '../metrics/shortener-metrics';
import { RedirectCounts, RedirectCountsState } from '../urls/redirect-counts';
import { ShortenerService } from '../urls/shortener.service';
import { pageStats, PageStats } from './page-stats';

/** Links in the page's "recent" list. */
export const RECENT_LINKS = 10;

export interface RecentLink {
  code: string;
  shortUrl: string;
  url: string;
  createdAt: string;
  /** Redirects counted so far, or null when the counts cannot be read (see `counts`). */
  redirects: number | null;
}

export interface RecentLinks {
  links: RecentLink[];
  /** Redirect counts: read from Redis (`up`), Redis down (`down`), cache off (`off`). */
  counts: RedirectCountsState;
}

/**
 * The JSON the page polls, under `/_/` so that it can never shadow a code. Answers are never
 * cached by the browser: the page asks every second.
 */
@Controller('_')
export class PageApiController {
  constructor(
    private readonly shortener: ShortenerService,
    private readonly redirects: RedirectCounts,
    private readonly metrics: ShortenerMetrics,
    private readonly stampede: StampedeService,
  ) {}

  /** The last links created (from the database), newest first, with their redirect counts. */
  @Get('recent')
  @Header('Cache-Control', 'no-store')
  async recent(): Promise<RecentLinks> {
    const records = await this.shortener.recent(RECENT_LINKS);
    const counts = await this.redirects.of(records.map((r) => r.code));
    return {
      links: records.map((r) => ({
        code: r.code,
        shortUrl: this.shortener.shortUrl(r.code),
        url: r.url,
        createdAt: r.createdAt,
        redirects: counts ? (counts.get(r.code) ?? 0) : null,
      })),
      counts: counts ? 'up' : this.redirects.state() === 'off' ? 'off' : 'down',
    };
  }

  /** The live panel: what the cache did since this instance started. */
  @Get('stats')
  @Header('Cache-Control', 'no-store')
  async stats(): Promise<PageStats> {
    return pageStats(this.stampede.metrics(), {
      redirects: await this.metrics.redirectCount(),
      dbLookups: await this.metrics.dbLookupCount(),
      cache: this.redirects.state(),
    });
  }
}
