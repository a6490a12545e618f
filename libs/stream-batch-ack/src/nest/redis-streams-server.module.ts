import { DynamicModule, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { StreamBatchAckConfigError } from '../core/errors';
import type { RedisStreamsServerOptions } from '../transport/redis-streams.options';
import { resolveServerOptions } from '../transport/server-options';
import { ServerRedisStreams } from '../transport/server-redis-streams';
import {
  REDIS_STREAMS_SERVER_ASYNC_OPTIONS_TYPE,
  REDIS_STREAMS_SERVER_OPTIONS,
  REDIS_STREAMS_SERVER_OPTIONS_TYPE,
  RedisStreamsServerConfigurableModule,
} from './redis-streams-server.module-definition';

/** The provider's factory: the options were resolved through DI (or given to forRoot). */
function createServerFromModuleOptions(options: RedisStreamsServerOptions): ServerRedisStreams {
  if (!options || typeof options !== 'object' || Array.isArray(options))
    throw new StreamBatchAckConfigError(
      'options',
      `RedisStreamsServerModule needs the ServerRedisStreams options ({ connection, group, ... }); forRootAsync's factory returned ${describeValue(options)}.`,
    );
  return new ServerRedisStreams(options);
}

function describeValue(value: unknown): string {
  if (value === undefined || value === null) return String(value);
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/**
 * Provides (and exports) a `ServerRedisStreams` built from options resolved through DI:
 * `forRoot(options)` or `forRootAsync({ imports, inject, useFactory })`, global by default
 * (`isGlobal: false` to keep it to the importing module). Hand it to Nest as the strategy:
 * `app.connectMicroservice({ strategy: app.get(ServerRedisStreams) })`, or
 * `NestFactory.createMicroservice(AppModule, { inject: [ServerRedisStreams], useFactory: (server) => ({ strategy: server }) })`.
 *
 * Nest closes the strategy when the app closes; the module closes it at application shutdown
 * too, which is a no-op then (`close()` runs once), and covers a server that was started
 * without Nest.
 */
@Module({
  providers: [
    {
      provide: ServerRedisStreams,
      inject: [REDIS_STREAMS_SERVER_OPTIONS],
      useFactory: createServerFromModuleOptions,
    },
  ],
  exports: [ServerRedisStreams],
})
export class RedisStreamsServerModule
  extends RedisStreamsServerConfigurableModule
  implements OnApplicationShutdown
{
  constructor(@Inject(ServerRedisStreams) private readonly server: ServerRedisStreams) {
    super();
  }

  /** Checks the options at once: a wrong option fails where the module is declared. */
  static override forRoot(options: typeof REDIS_STREAMS_SERVER_OPTIONS_TYPE): DynamicModule {
    const { isGlobal: _isGlobal, ...serverOptions } = options ?? ({} as typeof options);
    resolveServerOptions(serverOptions);
    return super.forRoot(options);
  }

  static override forRootAsync(
    options: typeof REDIS_STREAMS_SERVER_ASYNC_OPTIONS_TYPE,
  ): DynamicModule {
    return super.forRootAsync(options);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.server.close();
  }
}
