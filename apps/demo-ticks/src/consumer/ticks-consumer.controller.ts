import { Controller, Inject, Logger, Type } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { RedisStreamsBatchContext } from '@nest-redis-resilience/stream-batch-ack';
import { entryIdTime } from '../candles/candle';
import { CandleStore, DoneMark, TickEntry } from '../candles/candle-store';
import { parseTick } from '../candles/tick';
import { TicksConfig } from '../config';
import { TICKS_CONFIG } from '../ticks.constants';
import { TicksMetrics } from './ticks.metrics';

/**
 * The consumer of `config.stream`: a batch handler (each call gets a whole XREADGROUP batch). The
 * transport has already skipped the entries handled before (its idempotency, an in-process LRU and
 * Redis); the candle script marks each tick's idempotency record done in the same step as it
 * folds the tick, so even a redelivery that gets past that check is not counted twice.
 *
 * The class is made per app because the stream name (the `@EventPattern`) comes from the configuration.
 */
export function createTicksConsumerController(config: TicksConfig): Type<unknown> {
  @Controller()
  class TicksConsumerController {
    private readonly logger = new Logger('TicksConsumer');

    constructor(
      @Inject(CandleStore) private readonly store: CandleStore,
      @Inject(TicksMetrics) private readonly metrics: TicksMetrics,
      @Inject(TICKS_CONFIG) private readonly config: TicksConfig,
    ) {}

    @EventPattern(config.stream, { batch: true })
    async onTicks(
      @Payload() payloads: unknown[],
      @Ctx() ctx: RedisStreamsBatchContext,
    ): Promise<void> {
      const mark = ctx.idempotency;
      if (!mark) throw new Error('demo-ticks needs the transport idempotency with the Redis store');
      const valid: TickEntry[] = [];
      const rejected: Promise<void>[] = [];
      ctx.entries.forEach((entry, i) => {
        const parsed = parseTick(payloads[i]);
        const record = entry.idempotencyRecord!;
        if (parsed.ok) valid.push({ id: entry.id, tick: parsed.tick, record });
        else rejected.push(this.reject(ctx, i, record, mark, parsed.error));
      });
      try {
        const results = valid.length > 0 ? await this.store.apply(valid, mark) : [];
        const now = Date.now();
        results.forEach((result, i) => {
          if (result === 'applied') {
            this.metrics.ticksHandled.inc();
            this.metrics.e2eLatency.observe(Math.max(0, now - entryIdTime(valid[i].id)) / 1000);
          } else this.metrics.duplicatesSkipped.inc({ layer: 'effect' });
        });
        await Promise.all(rejected);
      } catch (err) {
        // Redis failed: the whole batch is retried (see the README).
        this.metrics.handlerErrors.inc();
        throw err;
      }
    }

    private async reject(
      ctx: RedisStreamsBatchContext,
      i: number,
      record: string,
      mark: DoneMark,
      error: string,
    ): Promise<void> {
      const entry = ctx.entries[i];
      const fresh = await this.store.reject(record, mark, this.config.deadLetterStream, {
        stream: ctx.stream,
        id: entry.id,
        group: ctx.group,
        consumer: ctx.consumer,
        deliveries: String(entry.deliveries),
        reason: 'invalid-tick',
        error,
        failedAt: new Date().toISOString(),
        fields: JSON.stringify(entry.fields),
      });
      if (fresh) {
        this.metrics.deadLettered.inc();
        this.logger.warn(`Entry ${entry.id}: ${error}; moved to ${this.config.deadLetterStream}`);
      } else this.metrics.duplicatesSkipped.inc({ layer: 'effect' });
    }
  }
  return TicksConsumerController;
}
