import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { RedisStreamsServerOptions } from '../transport/redis-streams.options';

/** The server's options as given (forRoot) or as the factory returns them (forRootAsync). */
export const {
  ConfigurableModuleClass: RedisStreamsServerConfigurableModule,
  MODULE_OPTIONS_TOKEN: REDIS_STREAMS_SERVER_OPTIONS,
  OPTIONS_TYPE: REDIS_STREAMS_SERVER_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: REDIS_STREAMS_SERVER_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RedisStreamsServerOptions>({ moduleName: 'RedisStreamsServer' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();
