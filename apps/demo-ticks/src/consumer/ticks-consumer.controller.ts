import { Controller, Logger } from '@nestjs/common';
import { Ctx, Payload } from '@nestjs/microservices';
import {
  deadLetterFields,
  RedisStreamsBatchContext,
  ServerRedisStreams,
  StreamEventPattern,
} from '@nest-redis-resilience/stream-batch-ack';
import { entryIdTime } from '../candles/candle';
import { CandleStore, DoneMark, TickEntry } from '../candles/candle-store';
import { checkTickTime, parseTick } from '../candles/tick';
import { InjectConfig } from '../config/ticks-config.module';
import { LimitsSettings } from '../config/ticks-env.schema';
import { TicksMetrics } from '../metrics/ticks.metrics';
import { TicksLiveFeed } from '../page/live-feed';
import { TICKS_PATTERN } from '../ticks.constants';

/**
 * Why the consumer dead-lettered a tick (the `reason` of its dead-letter entry):
 * - `invalid-tick`: a field is missing, not a number, or out of range (`TICK_MAX_PRICE`,
 *   `TICK_MAX_QTY`);
 * - `ts-out-of-window`: `ts` too far before or after the time the tick reached the stream;
 * - `volume-overflow`: the candle script refused it, since it would make a candle's volume infinite.
 */
export type TickRejection = 'invalid-tick' | 'ts-out-of-window' | 'volume-overflow';

/**
 * The consumer of the ticks stream (`TICKS_STREAM`): a batch handler (each call gets a whole
 * XREADGROUP batch, or a page of claimed entries). The transport has already skipped the entries
 * handled before (its idempotency, an in-process LRU and Redis); the candle script marks each
 * tick's idempotency record done in the same step as it folds the tick, so even a redelivery that
 * gets past that check is not counted twice. Ticks that would corrupt a candle are dead-lettered
 * (TickRejection).
 *
 * The stream's name is configuration (`consumer.stream`), which a decorator cannot read: the
 * handler's pattern is TICKS_PATTERN, which the server's option `streams` maps to that stream
 * (createTicksServer). Two apps in one process (the e2e tests) each consume their own stream.
 */
@Controller()
export class TicksConsumerController {
  private readonly logger = new Logger('TicksConsumer');

  constructor(
    private readonly server: ServerRedisStreams,
    private readonly store: CandleStore,
    private readonly metrics: TicksMetrics,
    @InjectConfig('limits') private readonly limits: LimitsSettings,
    private readonly live: TicksLiveFeed,
  ) {}

  @StreamEventPattern(TICKS_PATTERN, { batch: true })
  async onTicks(
    @Payload() payloads: unknown[],
    @Ctx() ctx: RedisStreamsBatchContext,
  ): Promise<void> {
    const mark = ctx.getIdempotency();
    if (!mark) throw new Error('demo-ticks needs the transport idempotency with the Redis store');
    const valid: TickEntry[] = [];
    /** The position in the batch of each valid tick. */
    const positions: number[] = [];
    const rejected: Promise<void>[] = [];
    const { limits } = this;
    ctx.getEntries().forEach((entry, i) => {
      const parsed = parseTick(payloads[i], limits);
      const record = entry.idempotencyRecord!;
      if (!parsed.ok) {
        rejected.push(this.reject(ctx, i, record, mark, 'invalid-tick', parsed.error));
        return;
      }
      // Judged against the entry's time (when Redis took it), not the clock of this handling.
      const late = checkTickTime(parsed.tick.ts, entryIdTime(entry.id), limits);
      if (late) rejected.push(this.reject(ctx, i, record, mark, 'ts-out-of-window', late));
      else {
        valid.push({ id: entry.id, tick: parsed.tick, record });
        positions.push(i);
      }
    });
    try {
      const results = valid.length > 0 ? await this.store.apply(valid, mark, ctx.getStream()) : [];
      const now = Date.now();
      const changed = new Set<string>();
      results.forEach((result, i) => {
        if (result === 'applied') {
          changed.add(valid[i].tick.symbol);
          this.metrics.ticksHandled.inc();
          this.metrics.e2eLatency.observe(Math.max(0, now - entryIdTime(valid[i].id)) / 1000);
        } else if (result === 'duplicate') this.metrics.duplicatesSkipped.inc({ layer: 'effect' });
        else {
          const { tick } = valid[i];
          const at = new Date(result.start).toISOString();
          const error = `volume of the ${result.interval} candle of ${tick.symbol} at ${at} would not be finite: ${result.volume} so far + qty ${tick.qty}`;
          rejected.push(
            this.reject(ctx, positions[i], valid[i].record, mark, 'volume-overflow', error),
          );
        }
      });
      this.live.applied(changed); // the open pages learn of it on their next turn
      await Promise.all(rejected);
    } catch (err) {
      // Redis failed: the whole batch is retried (see the README). The transport counts the
      // failed call (messaging_process_duration_seconds with error_type, redis_streams_messages_failed_total).
      await Promise.allSettled(rejected);
      throw err;
    }
  }

  private async reject(
    ctx: RedisStreamsBatchContext,
    i: number,
    record: string,
    mark: DoneMark,
    reason: TickRejection,
    error: string,
  ): Promise<void> {
    const entry = ctx.getEntries()[i];
    // Where the server puts its own dead letters of this stream (its `deadLetter.stream` option).
    const deadLetterStream = this.server.options.deadLetter.stream(ctx.getStream());
    // The library's dead-letter format: DeadLetters, sba-dlq and the health checks read it.
    const fields = deadLetterFields({
      stream: ctx.getStream(),
      id: entry.id,
      group: ctx.getGroup(),
      consumer: ctx.getConsumer(),
      deliveries: entry.deliveries,
      reason,
      error,
      fields: entry.fields,
    });
    const fresh = await this.store.reject(record, mark, deadLetterStream, fields);
    if (fresh) {
      this.metrics.deadLettered.inc({ reason });
      this.logger.warn(`Entry ${entry.id}: ${error}; moved to ${deadLetterStream}`);
    } else this.metrics.duplicatesSkipped.inc({ layer: 'effect' });
  }
}
