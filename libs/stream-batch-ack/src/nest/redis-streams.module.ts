import { DynamicModule, Module, Provider } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyOptions, IdempotencyStore } from './idempotency.store';
import { REDIS_STREAMS_MODULE_OPTIONS } from './redis-streams.constants';
import { RedisStreamsErrorInterceptor } from './redis-streams-error.interceptor';

export interface RedisStreamsModuleOptions {
  /** Idempotency store shared by every @Idempotent() handler of the app. */
  idempotency?: IdempotencyOptions;
  /** Register RedisStreamsErrorInterceptor globally (dead-letter entries keep the original error). Default true. */
  captureErrors?: boolean;
}

/**
 * Optional module (global): one IdempotencyStore for the app (L1, and L2 when `idempotency.redis`
 * is set) and the error-capturing interceptor.
 */
@Module({})
export class RedisStreamsModule {
  static forRoot(options: RedisStreamsModuleOptions = {}): DynamicModule {
    const providers: Provider[] = [
      { provide: REDIS_STREAMS_MODULE_OPTIONS, useValue: options },
      IdempotencyStore,
      IdempotencyInterceptor,
    ];
    if (options.captureErrors !== false)
      providers.push({ provide: APP_INTERCEPTOR, useClass: RedisStreamsErrorInterceptor });
    return {
      module: RedisStreamsModule,
      global: true,
      providers,
      exports: [REDIS_STREAMS_MODULE_OPTIONS, IdempotencyStore, IdempotencyInterceptor],
    };
  }
}
