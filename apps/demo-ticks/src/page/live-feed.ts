import { BeforeApplicationShutdown, Inject, Injectable, MessageEvent } from '@nestjs/common';
import {
  concatMap,
  exhaustMap,
  filter,
  from,
  interval,
  map,
  merge,
  Observable,
  ReplaySubject,
  share,
  shareReplay,
  startWith,
  takeUntil,
  timer,
} from 'rxjs';
import { ServerRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { RedisStreamsHealthIndicator } from '@nest-redis-resilience/stream-batch-ack/health';
import { CandleStore } from '../candles/candle-store';
import { IntervalName } from '../candles/interval';
import { InjectConfig } from '../config/ticks-config.module';
import { ConsumerSettings } from '../config/ticks-env.schema';
import { TicksMetrics } from '../metrics/ticks.metrics';
import { ConsumerSample, consumerRates, ConsumerStats } from './consumer-stats';

/** How often the symbols touched by the consumer are pushed to the pages (coalesced). */
export const PUSH_INTERVAL_MS = 400;
/** How often the consumer figures are sampled. */
export const STATS_INTERVAL_MS = 1000;
/** The longest shutdown waits for the pages' responses to close. */
export const SHUTDOWN_WAIT_MS = 2000;
/** Candles of the first message (the chart's history). */
export const CHART_CANDLES = 500;

/** What the feed needs of a page's HTTP response: to know when it closed, and to cut it. */
export interface PageResponse {
  once(event: 'close', listener: () => void): unknown;
  destroy(): void;
}

/**
 * What the page's event stream (`GET /_/events`) carries. The consumer's batch handler reports
 * the symbols it folded ticks of (`applied`); a shared timer hands the set collected since its
 * last turn to every open page, at most every PUSH_INTERVAL_MS, so the cost does not grow with
 * the tick rate: per page and turn, one read of the touched symbols' prices and, when the page's
 * symbol is among them, one read of its last two candles. Nothing runs while no page is open.
 *
 * Events (`event:` name, JSON `data:`):
 * - `prices` `{ full, prices: [{ symbol, price, ts }] }`: every symbol first (`full: true`),
 *   then the ones that changed;
 * - `candles` `{ symbol, interval, reset, candles }`: the last CHART_CANDLES first
 *   (`reset: true`), then the last two (the current one and the one before it);
 * - `stats` (ConsumerStats) every STATS_INTERVAL_MS;
 * - `problem` `{ message }` when Redis could not be read (the next turn reads everything again).
 */
@Injectable()
export class TicksLiveFeed implements BeforeApplicationShutdown {
  private touched = new Set<string>();
  private previous?: ConsumerSample;
  private readonly closing$ = new ReplaySubject<void>(1);
  /** The open pages' responses, until they close, each with the promise of its close. */
  private readonly responses = new Map<PageResponse, Promise<void>>();

  /** Symbols changed since the previous turn; one timer, shared by the open pages. */
  private readonly changes$: Observable<ReadonlySet<string>> = interval(PUSH_INTERVAL_MS).pipe(
    map(() => this.drain()),
    filter((symbols) => symbols.size > 0),
    takeUntil(this.closing$),
    share(),
  );

  /** Consumer figures; one sampler, shared; a page that opens gets the last sample at once. */
  readonly stats$: Observable<ConsumerStats> = timer(0, STATS_INTERVAL_MS).pipe(
    exhaustMap(() => this.readStats()),
    takeUntil(this.closing$),
    shareReplay({ bufferSize: 1, refCount: true }),
  );

  constructor(
    @Inject(CandleStore) private readonly store: CandleStore,
    @Inject(TicksMetrics) private readonly metrics: TicksMetrics,
    @Inject(ServerRedisStreams) private readonly server: ServerRedisStreams,
    @Inject(RedisStreamsHealthIndicator) private readonly streams: RedisStreamsHealthIndicator,
    @InjectConfig('consumer') private readonly consumer: ConsumerSettings,
  ) {}

  /**
   * Called by the consumer after a batch was stored. Only records names (the set holds each
   * symbol once), so it costs next to nothing at 10,000 ticks/s.
   */
  applied(symbols: Iterable<string>): void {
    for (const symbol of symbols) this.touched.add(symbol);
  }

  /**
   * The events of one page, for `symbol` (none yet: prices and stats only) and `interval`.
   * `response`: the page's HTTP response, awaited (and cut if it lingers) at shutdown.
   */
  events(
    symbol: string | undefined,
    candleInterval: IntervalName,
    response?: PageResponse,
  ): Observable<MessageEvent> {
    if (response) {
      const closed = new Promise<void>((resolve) => response.once('close', resolve));
      this.responses.set(response, closed);
      void closed.then(() => this.responses.delete(response));
    }
    let full = true; // the next read is the complete first message
    const updates = this.changes$.pipe(
      startWith(undefined),
      // One read at a time per page: a slow Redis delays the page, it does not pile up reads.
      concatMap(async (touched) => {
        try {
          const events = await this.read(symbol, candleInterval, full ? undefined : touched);
          full = false;
          return events;
        } catch (err) {
          full = true;
          return [{ type: 'problem', data: { message: (err as Error).message } }];
        }
      }),
      concatMap((events) => from(events)),
    );
    const stats = this.stats$.pipe(map((data): MessageEvent => ({ type: 'stats', data })));
    return merge(updates, stats).pipe(takeUntil(this.closing$));
  }

  /**
   * Ends every page's stream, and waits (at most SHUTDOWN_WAIT_MS) until their responses are
   * closed; the ones still open then are cut. The HTTP server, closed next, only closes the
   * connections idle at that moment: a keep-alive one whose response ended later would hold
   * `app.close()` for its keep-alive timeout.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.closing$.next();
    this.closing$.complete();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(this.responses.values()),
      new Promise((resolve) => (timer = setTimeout(resolve, SHUTDOWN_WAIT_MS))),
    ]);
    clearTimeout(timer);
    for (const response of this.responses.keys()) response.destroy();
  }

  private drain(): ReadonlySet<string> {
    const symbols = this.touched;
    this.touched = new Set();
    return symbols;
  }

  /** `touched` undefined: everything (the first message); else what changed. */
  private async read(
    symbol: string | undefined,
    candleInterval: IntervalName,
    touched: ReadonlySet<string> | undefined,
  ): Promise<MessageEvent[]> {
    const names = touched ? [...touched].sort() : await this.store.symbols();
    const events: MessageEvent[] = [
      { type: 'prices', data: { full: !touched, prices: await this.store.latestMany(names) } },
    ];
    if (symbol !== undefined && (!touched || touched.has(symbol))) {
      const candles = await this.store.candles(symbol, candleInterval, touched ? 2 : CHART_CANDLES);
      events.push({
        type: 'candles',
        data: { symbol, interval: candleInterval, reset: !touched, candles: candles ?? [] },
      });
    }
    return events;
  }

  private async readStats(): Promise<ConsumerStats> {
    const at = Date.now();
    const handled = await this.metrics.value('ticks_handled_total');
    // The transport's own counters (the same XACKs as redis_streams_xack_calls_total / _ids).
    const { xackCalls: xacks, xackIds: ackedIds } = this.server.metrics();
    const sample = { at, handled, xacks, ackedIds };
    const rates = consumerRates(this.previous, sample);
    this.previous = sample;
    const result = await this.streams.isHealthy('stream', {
      client: this.server,
      stream: this.consumer.stream,
      group: this.consumer.group,
    });
    const group = result.stream as Record<string, unknown>;
    const count = (v: unknown) => (typeof v === 'number' ? v : null);
    return {
      at,
      handledTotal: handled,
      xackTotal: xacks,
      ...rates,
      lag: count(group.lag),
      pending: count(group.pending),
      ackQueue: this.server.pendingAcks,
      inFlight: this.server.inFlightCount,
      ...(typeof group.message === 'string' ? { problem: group.message } : {}),
    };
  }
}
