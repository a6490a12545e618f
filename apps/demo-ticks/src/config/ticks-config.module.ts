import { DynamicModule, Inject } from '@nestjs/common';
import { ConfigModule, getConfigToken, registerAs } from '@nestjs/config';
import { TicksSettings } from './ticks-env.schema';

export type TicksNamespace = keyof TicksSettings;

/** The injection token of a namespace: what `registerAs(name, ...).KEY` is. */
export function configToken(name: TicksNamespace): string {
  return getConfigToken(name);
}

/** Injects one namespace: `@InjectConfig('consumer') consumer: ConsumerSettings`. */
export const InjectConfig = (name: TicksNamespace): PropertyDecorator & ParameterDecorator =>
  Inject(configToken(name));

/**
 * ConfigModule (global) with one `registerAs` namespace per concern, from settings that
 * parseTicksEnv validated. The settings are passed in rather than read from process.env here, so
 * that two apps in one process (the e2e tests) each have their own. Also available through
 * ConfigService: `config.get('consumer.stream')`.
 */
export function ticksConfigModule(settings: TicksSettings): Promise<DynamicModule> {
  const names = Object.keys(settings) as TicksNamespace[];
  return ConfigModule.forRoot({
    isGlobal: true,
    // Validated already: neither a .env file nor process.env is read (or written) here.
    ignoreEnvFile: true,
    ignoreEnvVars: true,
    skipProcessEnv: true,
    load: names.map((name) => registerAs(name, () => settings[name])),
  });
}
