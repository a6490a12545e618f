// Entry point `@nest-redis-resilience/stampede/health`: everything that needs @nestjs/terminus.
import './health/require-terminus';

export { StampedeHealthIndicator } from './health/stampede.health';
export { StampedeHealthModule } from './health/stampede-health.module';
