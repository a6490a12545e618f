/** Metadata key under which the decorators record a method's policy. */
export const STAMPEDE_POLICY = 'stampede:policy';
/** Injection token of the StampedeStore in use. */
export const STAMPEDE_STORE = Symbol('STAMPEDE_STORE');
/** The name of the configuration of `StampedeModule.forRoot()` without `name`. */
export const DEFAULT_STAMPEDE_NAME = 'default';
/** Internal: each configuration's `{ name, service, store }`, found app-wide by discovery. */
export const STAMPEDE_CONFIGURATION = Symbol('STAMPEDE_CONFIGURATION');
