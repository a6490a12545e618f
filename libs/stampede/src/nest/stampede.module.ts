import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { createStampedeStore } from './stampede-store.factory';
import type { StampedeModuleOptions } from './stampede.options';
import { validateStampedeOptions } from './stampede-options.validation';
import { STAMPEDE_STORE } from './stampede.constants';
import { StampedeExplorer } from './stampede.explorer';
import { StampedeConfigurableModule, STAMPEDE_MODULE_OPTIONS } from './stampede.module-definition';
import { StampedeService } from './stampede.service';

/**
 * `StampedeModule.forRoot({ redis: 'redis://localhost:6379', isGlobal: true })` or
 * `forRootAsync({ imports, inject, useFactory })`. Wraps every decorated provider method of the app.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: STAMPEDE_STORE,
      inject: [STAMPEDE_MODULE_OPTIONS],
      useFactory: (options: StampedeModuleOptions) => {
        validateStampedeOptions(options);
        return createStampedeStore(options);
      },
    },
    StampedeService,
    StampedeExplorer,
  ],
  exports: [StampedeService, STAMPEDE_STORE],
})
export class StampedeModule extends StampedeConfigurableModule {}
