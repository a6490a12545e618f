import { Controller, Inject, Logger, Type } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { IdempotencyStore, Idempotent, RedisStreamsContext } from '@app/stream-batch-ack';
import { entryIdTime } from '../candles/candle';
import { CandleStore } from '../candles/candle-store';
import { parseTick } from '../candles/tick';
import { TicksConfig } from '../config';
import { TICKS_CONFIG } from '../ticks.constants';
import { TicksMetrics } from './ticks.metrics';

/** What the handler did with one delivery. */
export type TickOutcome = 'applied' | 'duplicate' | 'dead-lettered';

/**
 * The in-process idempotency store of `@Idempotent()` (an LRU of processed entry ids, as in the
 * article), counting the deliveries it skips as duplicates of the "memory" layer.
 */
export class CountingIdempotencyStore extends IdempotencyStore {
  constructor(
    options: { ttlMs: number; maxSize: number },
    private readonly metrics: TicksMetrics,
  ) {
    super({ idempotency: options });
  }

  override async begin(key: string, lockMs?: number) {
    const result = await super.begin(key, lockMs);
    if (result.state === 'done') this.metrics.duplicatesSkipped.inc({ layer: 'memory' });
    return result;
  }
}

/**
 * The consumer of `config.stream`. The class is made per app because the stream name (the
 * `@EventPattern`) comes from the configuration.
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

    @EventPattern(config.stream)
    @Idempotent({ ttlMs: config.idempotency.ttlMs })
    async onTick(
      @Payload() payload: unknown,
      @Ctx() ctx: RedisStreamsContext,
    ): Promise<TickOutcome> {
      try {
        return await this.handle(payload, ctx);
      } catch (err) {
        // Redis failed: the entry stays pending and is delivered again (see the README).
        this.metrics.handlerErrors.inc();
        throw err;
      }
    }

    private async handle(payload: unknown, ctx: RedisStreamsContext): Promise<TickOutcome> {
      const parsed = parseTick(payload);
      if (!parsed.ok) {
        const fresh = await this.store.reject(ctx.id, this.config.deadLetterStream, {
          stream: ctx.stream,
          id: ctx.id,
          group: ctx.group,
          consumer: ctx.consumer,
          deliveries: String(ctx.deliveries),
          reason: 'invalid-tick',
          error: parsed.error,
          failedAt: new Date().toISOString(),
          fields: JSON.stringify(ctx.fields),
        });
        if (fresh) {
          this.metrics.deadLettered.inc();
          this.logger.warn(
            `Entry ${ctx.id}: ${parsed.error}; moved to ${this.config.deadLetterStream}`,
          );
        } else this.metrics.duplicatesSkipped.inc({ layer: 'redis' });
        return 'dead-lettered';
      }
      const result = await this.store.apply(ctx.id, parsed.tick);
      if (result === 'applied') {
        this.metrics.ticksHandled.inc();
        this.metrics.e2eLatency.observe(Math.max(0, Date.now() - entryIdTime(ctx.id)) / 1000);
      } else {
        this.metrics.duplicatesSkipped.inc({ layer: 'redis' });
      }
      return result;
    }
  }
  return TicksConsumerController;
}
