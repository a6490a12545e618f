// Entry point `@nest-redis-resilience/stream-batch-ack/health`: everything that needs @nestjs/terminus.
import './health/require-terminus';

export {
  RedisStreamsHealthIndicator,
  type RedisStreamsHealthOptions,
  type RedisStreamsServerHealthOptions,
} from './health/redis-streams.health';
export { RedisStreamsHealthModule } from './health/redis-streams-health.module';
