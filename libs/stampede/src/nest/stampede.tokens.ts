import { Inject } from '@nestjs/common';
import { checkNamespace } from '../core/namespace';
import { DEFAULT_STAMPEDE_NAME, STAMPEDE_STORE } from './stampede.constants';
import { StampedeService } from './stampede.service';

/** Where a service is injected from: a configuration (`forRoot({ name })`), a namespace in it. */
export interface StampedeRef {
  /** The configuration's name. Default: the configuration of `forRoot()` without a name. */
  name?: string;
  /** A namespace of `StampedeModule.forFeature({ namespace })`: injects a StampedeNamespace. */
  namespace?: string;
}

export function isDefaultStampede(name: string | undefined): boolean {
  return name === undefined || name === DEFAULT_STAMPEDE_NAME;
}

/** The token of a configuration's StampedeService: the class itself for the default one. */
export function getStampedeToken(name?: string): string | typeof StampedeService {
  return isDefaultStampede(name) ? StampedeService : `StampedeService:${name}`;
}

/** The token of a configuration's store: STAMPEDE_STORE for the default one. */
export function getStampedeStoreToken(name?: string): string | symbol {
  return isDefaultStampede(name) ? STAMPEDE_STORE : `StampedeStore:${name}`;
}

/** The token of the StampedeNamespace of `forFeature({ namespace, name })`. */
export function getStampedeNamespaceToken(namespace: string, name?: string): string {
  checkNamespace(namespace, 'getStampedeNamespaceToken');
  return `StampedeNamespace:${isDefaultStampede(name) ? DEFAULT_STAMPEDE_NAME : name}:${namespace}`;
}

/**
 * Injects the StampedeService of a named configuration (`@InjectStampede('sessions')`), of the
 * default one (`@InjectStampede()`, the same as injecting `StampedeService` by type), or the
 * StampedeNamespace of `forFeature` (`@InjectStampede({ namespace: 'billing' })`).
 */
export function InjectStampede(ref?: string | StampedeRef): PropertyDecorator & ParameterDecorator {
  const { name, namespace } = typeof ref === 'object' ? ref : { name: ref, namespace: undefined };
  return Inject(
    namespace === undefined ? getStampedeToken(name) : getStampedeNamespaceToken(namespace, name),
  );
}
