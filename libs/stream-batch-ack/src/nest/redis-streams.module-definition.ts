import { ConfigurableModuleBuilder } from '@nestjs/common';

export interface RedisStreamsModuleOptions {
  /** Register RedisStreamsErrorInterceptor globally (dead-letter entries keep the original error). Default true. */
  captureErrors?: boolean;
}

export const {
  ConfigurableModuleClass: RedisStreamsConfigurableModule,
  MODULE_OPTIONS_TOKEN: REDIS_STREAMS_MODULE_OPTIONS,
  OPTIONS_TYPE: REDIS_STREAMS_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: REDIS_STREAMS_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RedisStreamsModuleOptions>({ moduleName: 'RedisStreams' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();
