/** Metadata key under which the decorators record a method's policy. */
export const STAMPEDE_POLICY = 'stampede:policy';
/** Injection token of the StampedeStore in use. */
export const STAMPEDE_STORE = Symbol('STAMPEDE_STORE');
