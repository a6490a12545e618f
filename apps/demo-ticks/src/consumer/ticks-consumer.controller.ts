import { Controller, Inject, Logger, Type } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { IdempotencyStore, RedisStreamsContext } from '@nest-redis-resilience/stream-batch-ack';
import { entryIdTime } from '../candles/candle';
import { CandleStore } from '../candles/candle-store';
import { parseTick } from '../candles/tick';
import { TicksConfig } from '../config';
import { TICKS_CONFIG } from '../ticks.constants';
import { TicksMetrics } from './ticks.metrics';

/** What the handler did with one delivery. */
export type TickOutcome = 'applied' | 'duplicate' | 'dead-lettered';

/**
 * The consumer of `config.stream`. The class is made per app because the stream name (the
 * `@EventPattern`) comes from the configuration.
 *
 * It does what `@Idempotent()` does (an IdempotencyStore, the same outcomes: an entry already
 * handled is skipped and acknowledged, one in progress is skipped and left pending, a failed run
 * forgets its key), but inline: `@Idempotent()` is a Nest interceptor, and Nest's
 * interceptor chain (two `AsyncResource.bind` and several rxjs subscriptions per message) took
 * about 40 % of the consumer's CPU at 10,000 ticks/s. With no interceptor, guard or pipe on it,
 * the handler is called almost directly.
 */
export function createTicksConsumerController(config: TicksConfig): Type<unknown> {
  @Controller()
  class TicksConsumerController {
    private readonly logger = new Logger('TicksConsumer');

    constructor(
      @Inject(CandleStore) private readonly store: CandleStore,
      @Inject(TicksMetrics) private readonly metrics: TicksMetrics,
      @Inject(TICKS_CONFIG) private readonly config: TicksConfig,
      @Inject(IdempotencyStore) private readonly idempotency: IdempotencyStore,
    ) {}

    @EventPattern(config.stream)
    async onTick(
      @Payload() payload: unknown,
      @Ctx() ctx: RedisStreamsContext,
    ): Promise<TickOutcome | undefined> {
      // The store is this consumer's own (one stream, one group): the entry id is the key. It is
      // the string the reply already holds, so the 100k remembered ids cost no key strings.
      const key = ctx.id;
      const begun = await this.idempotency.begin(key);
      if (begun.state === 'done') {
        // Handled before by this process: acknowledged again, nothing else.
        this.metrics.duplicatesSkipped.inc({ layer: 'memory' });
        return undefined;
      }
      if (begun.state === 'processing') {
        ctx.skipAck(); // being handled elsewhere: stays pending
        return undefined;
      }
      try {
        const outcome = await this.handle(payload, ctx);
        await this.idempotency.complete(key, this.config.idempotency.ttlMs);
        return outcome;
      } catch (err) {
        // Redis failed: the entry stays pending and is delivered again (see the README).
        this.metrics.handlerErrors.inc();
        if (!ctx.hasError()) ctx.setError(err);
        await this.idempotency.fail(key, begun.token).catch(() => undefined);
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
