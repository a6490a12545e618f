import { DynamicModule, Inject, Injectable, Module, NestInterceptor } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { RedisStreamsErrorInterceptor } from './redis-streams-error.interceptor';
import {
  REDIS_STREAMS_ASYNC_OPTIONS_TYPE,
  REDIS_STREAMS_MODULE_OPTIONS,
  REDIS_STREAMS_OPTIONS_TYPE,
  RedisStreamsConfigurableModule,
  RedisStreamsModuleOptions,
} from './redis-streams.module-definition';

/** The global error capture, unless `captureErrors: false` (the options may come from forRootAsync). */
@Injectable()
class OptionalErrorCapture extends RedisStreamsErrorInterceptor implements NestInterceptor {
  constructor(
    @Inject(REDIS_STREAMS_MODULE_OPTIONS) private readonly options: RedisStreamsModuleOptions,
  ) {
    super();
  }

  override intercept(...args: Parameters<RedisStreamsErrorInterceptor['intercept']>) {
    return this.options.captureErrors === false ? args[1].handle() : super.intercept(...args);
  }
}

/**
 * Optional module: registers the error-capturing interceptor globally, so that dead-letter
 * entries keep the handler's original error. `forRoot()` / `forRootAsync()`; global by default.
 * (Hybrid apps: pass `{ inheritAppConfig: true }` to `connectMicroservice`.)
 */
@Module({
  providers: [{ provide: APP_INTERCEPTOR, useClass: OptionalErrorCapture }],
})
export class RedisStreamsModule extends RedisStreamsConfigurableModule {
  static override forRoot(options: typeof REDIS_STREAMS_OPTIONS_TYPE = {}): DynamicModule {
    return super.forRoot(options);
  }

  static override forRootAsync(options: typeof REDIS_STREAMS_ASYNC_OPTIONS_TYPE): DynamicModule {
    return super.forRootAsync(options);
  }
}
