import { Module } from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { ClientRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { configToken } from '../config/ticks-config.module';
import { CollectorSettings, RedisSettings } from '../config/ticks-env.schema';
import { transportConnection } from '../redis/redis-connection';
import { partitionsOption } from '../redis/tick-streams';
import { TICKS_CLIENT } from '../ticks.constants';
import { CollectorService } from './collector.service';

/**
 * The collector: CollectorService and its ClientRedisStreams, configured from the `redis` and
 * `collector` namespaces (import ticksConfigModule first).
 */
/** The partition key of a tick: its symbol, when it has one (else the partitions take turns). */
function symbolOf(tick: unknown): string | undefined {
  const symbol = (tick as { symbol?: unknown } | null)?.symbol;
  return typeof symbol === 'string' ? symbol : undefined;
}

@Module({
  imports: [
    ClientsModule.registerAsync([
      {
        name: TICKS_CLIENT,
        inject: [configToken('redis'), configToken('collector')],
        useFactory: (redis: RedisSettings, collector: CollectorSettings) => ({
          customClass: ClientRedisStreams,
          options: {
            connection: transportConnection(redis),
            // TICKS_PARTITIONS: each tick goes to the partition of its symbol (order kept per symbol).
            partitions: partitionsOption(collector),
            partitionKey: (_stream: string, tick: unknown) => symbolOf(tick),
            ...(collector.maxLen > 0 ? { maxLen: collector.maxLen } : {}),
          },
        }),
      },
    ]),
  ],
  providers: [CollectorService],
  exports: [CollectorService],
})
export class CollectorModule {}
