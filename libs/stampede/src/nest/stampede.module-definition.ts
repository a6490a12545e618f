import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { StampedeModuleOptions } from './stampede.options';

export interface StampedeModuleExtras {
  /** StampedeService (and STAMPEDE_STORE) in every module of the app. Default false. */
  isGlobal?: boolean;
  /**
   * A named configuration, beside the default one: its service is injected with
   * `@InjectStampede(name)` and decorated methods use it with `@Cacheable({ stampede: name })`.
   * Default: the default configuration (`'default'`).
   */
  name?: string;
}

export const {
  ConfigurableModuleClass: StampedeConfigurableModule,
  MODULE_OPTIONS_TOKEN: STAMPEDE_MODULE_OPTIONS,
  OPTIONS_TYPE: STAMPEDE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: STAMPEDE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<StampedeModuleOptions>({ moduleName: 'Stampede' })
  .setClassMethodName('forRoot')
  .setExtras<StampedeModuleExtras>({ isGlobal: false, name: undefined }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();
