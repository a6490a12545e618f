import { DynamicModule, Module, Provider } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, ModuleRef, ModulesContainer } from '@nestjs/core';
import { StampedeConfigError } from '../core/errors';
import { checkNamespace } from '../core/namespace';
import type { StampedeStore } from '../core/store';
import { describeConfigurations, findStampedeConfigurations } from './stampede-configuration';
import { StampedeNamespace } from './stampede-namespace';
import { createStampedeStore } from './stampede-store.factory';
import { DEFAULT_STAMPEDE_NAME, STAMPEDE_CONFIGURATION } from './stampede.constants';
import { validateStampedeOptions } from './stampede-options.validation';
import { StampedeExplorer } from './stampede.explorer';
import {
  STAMPEDE_ASYNC_OPTIONS_TYPE,
  STAMPEDE_MODULE_OPTIONS,
  STAMPEDE_OPTIONS_TYPE,
  StampedeConfigurableModule,
} from './stampede.module-definition';
import type { StampedeModuleOptions } from './stampede.options';
import { StampedeService } from './stampede.service';
import {
  getStampedeNamespaceToken,
  getStampedeStoreToken,
  getStampedeToken,
  isDefaultStampede,
} from './stampede.tokens';

export interface StampedeFeatureOptions {
  /** Every key and tag of the feature's StampedeNamespace goes under `<namespace>:`. */
  namespace: string;
  /** The configuration (`forRoot({ name })`) the namespace lives in. Default: the default one. */
  name?: string;
}

/**
 * `StampedeModule.forRoot({ redis: 'redis://localhost:6379', isGlobal: true })` or
 * `forRootAsync({ imports, inject, useFactory })`; `name` adds another configuration beside the
 * default one. Wraps every decorated provider method of the app. `forFeature({ namespace })`
 * gives a feature module a StampedeNamespace of a configuration.
 */
@Module({ imports: [DiscoveryModule] })
export class StampedeModule extends StampedeConfigurableModule {
  static forRoot(options: typeof STAMPEDE_OPTIONS_TYPE): DynamicModule {
    return withConfiguration(super.forRoot(options), options.name);
  }

  static forRootAsync(options: typeof STAMPEDE_ASYNC_OPTIONS_TYPE): DynamicModule {
    return withConfiguration(super.forRootAsync(options), options.name);
  }

  /**
   * A StampedeNamespace for this module's providers, injected with
   * `@InjectStampede({ namespace })`. Its configuration is found app-wide, so it need not be global.
   */
  static forFeature(options: StampedeFeatureOptions): DynamicModule {
    const where = 'StampedeModule.forFeature';
    if (typeof options !== 'object' || options === null) {
      throw new StampedeConfigError(`${where}: give { namespace, name? }`);
    }
    const namespace = checkNamespace(options.namespace, where);
    const { name } = options;
    const token = getStampedeNamespaceToken(namespace, name);
    return {
      module: StampedeModule,
      providers: [
        {
          provide: token,
          inject: [ModulesContainer],
          useFactory: (modules: ModulesContainer) =>
            new StampedeNamespace(() => serviceOf(modules, name, namespace), namespace),
        },
      ],
      exports: [token],
    };
  }
}

/** The service of the configuration a namespace lives in, found once every provider exists. */
function serviceOf(
  modules: ModulesContainer,
  name: string | undefined,
  namespace: string,
): StampedeService {
  const configurations = findStampedeConfigurations(new DiscoveryService(modules));
  const wanted = name ?? DEFAULT_STAMPEDE_NAME;
  const configuration = configurations.get(wanted);
  if (!configuration) {
    throw new StampedeConfigError(
      `StampedeModule.forFeature({ namespace: '${namespace}' }) needs the configuration '${wanted}', ` +
        `but the app has ${describeConfigurations(configurations)}: import StampedeModule.forRoot(` +
        `${isDefaultStampede(name) ? '' : `{ name: '${wanted}', ... }`}) in a module of the app.`,
    );
  }
  return configuration.service;
}

/**
 * Every configuration has its store, service, explorer and a record of them, in its module. A
 * named one holds its store and service under tokens of its name only, so that neither
 * `app.get(StampedeService)` nor an injection by type can reach another configuration's.
 */
function withConfiguration(definition: DynamicModule, name: string | undefined): DynamicModule {
  if (name !== undefined && (typeof name !== 'string' || name === '')) {
    throw new StampedeConfigError(
      `StampedeModule.forRoot: name must be a non-empty string, got ${String(name)}`,
    );
  }
  const serviceToken = getStampedeToken(name);
  const storeToken = getStampedeStoreToken(name);
  const service: Provider = isDefaultStampede(name)
    ? StampedeService
    : {
        provide: serviceToken,
        inject: [storeToken, STAMPEDE_MODULE_OPTIONS, ModuleRef],
        useFactory: (store: StampedeStore, options: StampedeModuleOptions, moduleRef: ModuleRef) =>
          new StampedeService(store, options, moduleRef),
      };
  const providers: Provider[] = [
    {
      provide: storeToken,
      inject: [STAMPEDE_MODULE_OPTIONS],
      useFactory: (options: StampedeModuleOptions) => {
        validateStampedeOptions(options);
        return createStampedeStore(options);
      },
    },
    service,
    StampedeExplorer,
    {
      provide: STAMPEDE_CONFIGURATION,
      inject: [serviceToken, storeToken],
      useFactory: (service: StampedeService, store: StampedeStore) => ({
        name: name ?? DEFAULT_STAMPEDE_NAME,
        service,
        store,
      }),
    },
  ];
  return {
    ...definition,
    providers: [...(definition.providers ?? []), ...providers],
    exports: [...(definition.exports ?? []), serviceToken, storeToken],
  };
}
