import type { IdempotentOptions } from '../idempotency/idempotency.options';
import { IDEMPOTENT_METADATA } from './redis-streams.constants';

/** Where @nestjs/microservices keeps the extras of `@EventPattern(pattern, extras)`. */
const PATTERN_EXTRAS_METADATA = 'microservices:pattern_extras';

/**
 * Makes a handler idempotent: the transport skips messages whose key was already processed (and
 * acknowledges them), skips without acknowledging those in progress elsewhere, and forgets the
 * key of a failed run so that its retry runs. Checked a whole read batch at a time, before the
 * handler (see the server's `idempotency` option for the store). Metadata only: the transport
 * reads it once at start-up; put it above or below `@EventPattern`.
 */
export function Idempotent(options: IdempotentOptions = {}): MethodDecorator {
  return (_target, _key, descriptor) => {
    const handler = descriptor.value as object;
    Reflect.defineMetadata(IDEMPOTENT_METADATA, options, handler);
    Reflect.defineMetadata(
      PATTERN_EXTRAS_METADATA,
      { ...Reflect.getMetadata(PATTERN_EXTRAS_METADATA, handler), idempotent: options },
      handler,
    );
    return descriptor;
  };
}
