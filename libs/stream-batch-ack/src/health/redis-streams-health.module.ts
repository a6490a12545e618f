import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { RedisStreamsHealthIndicator } from './redis-streams.health';

/**
 * Provides RedisStreamsHealthIndicator. Import it in the module of your health controller:
 * `imports: [TerminusModule, RedisStreamsHealthModule]`.
 */
@Module({
  imports: [TerminusModule],
  providers: [RedisStreamsHealthIndicator],
  exports: [RedisStreamsHealthIndicator],
})
export class RedisStreamsHealthModule {}
