import type { DiscoveryService } from '@nestjs/core';
import type { StampedeStore } from '../core/store';
import { STAMPEDE_CONFIGURATION } from './stampede.constants';
import type { StampedeService } from './stampede.service';

/** One `StampedeModule.forRoot()` of the app. */
export interface StampedeConfiguration {
  name: string;
  service: StampedeService;
  store: StampedeStore;
}

/**
 * The configurations of the app by name, wherever their modules are imported (none need be
 * global). Call it from onModuleInit or later: every provider exists by then.
 */
export function findStampedeConfigurations(
  discovery: DiscoveryService,
): Map<string, StampedeConfiguration> {
  const found = new Map<string, StampedeConfiguration>();
  for (const wrapper of discovery.getProviders()) {
    if (wrapper.token !== STAMPEDE_CONFIGURATION) continue;
    const configuration = wrapper.instance as StampedeConfiguration | undefined;
    if (configuration && !found.has(configuration.name)) {
      found.set(configuration.name, configuration);
    }
  }
  return found;
}

export function describeConfigurations(configurations: Map<string, unknown>): string {
  const names = [...configurations.keys()].map((name) => `'${name}'`);
  return names.length === 0 ? 'none' : names.join(', ');
}
