import { DynamicModule, Module } from '@nestjs/common';
import { ClientsModule } from '@nestjs/microservices';
import { ClientRedisStreams } from '@nest-redis-resilience/stream-batch-ack';
import { CollectorConfig } from '../config';
import { TICKS_CLIENT } from '../ticks.constants';
import { COLLECTOR_CONFIG, CollectorService } from './collector.service';

/** The collector: CollectorService and its ClientRedisStreams. */
@Module({})
export class CollectorModule {
  static register(config: CollectorConfig): DynamicModule {
    return {
      module: CollectorModule,
      imports: [
        ClientsModule.register([
          {
            name: TICKS_CLIENT,
            customClass: ClientRedisStreams,
            options: {
              connection: config.redisUrl,
              ...(config.maxLen > 0 ? { maxLen: config.maxLen } : {}),
            },
          },
        ]),
      ],
      providers: [{ provide: COLLECTOR_CONFIG, useValue: config }, CollectorService],
      exports: [CollectorService],
    };
  }
}
