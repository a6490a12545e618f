import { Module } from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { ClientRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { configToken } from '../config/ticks-config.module';
import { CollectorSettings, RedisSettings } from '../config/ticks-env.schema';
import { transportConnection } from '../config/redis-connection';
import { TICKS_CLIENT } from '../ticks.constants';
import { CollectorService } from './collector.service';

/**
 * The collector: CollectorService and its ClientRedisStreams, configured from the `redis` and
 * `collector` namespaces (import ticksConfigModule first).
 */
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
