import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { StampedeModuleOptions } from './stampede.options';

export const {
  ConfigurableModuleClass: StampedeConfigurableModule,
  MODULE_OPTIONS_TOKEN: STAMPEDE_MODULE_OPTIONS,
  OPTIONS_TYPE: STAMPEDE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: STAMPEDE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<StampedeModuleOptions>({ moduleName: 'Stampede' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: false }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();
