import { applyDecorators, SetMetadata, UseInterceptors } from '@nestjs/common';
import { IDEMPOTENT_METADATA } from './redis-streams.constants';
import { IdempotencyInterceptor } from './idempotency.interceptor';

export interface IdempotentOptions {
  /** The idempotency key of a message. Default: the stream and the entry id. */
  key?: (data: any, ctx: any) => string;
  /** How long a processed key is remembered, in ms. Default 60_000. */
  ttlMs?: number;
  /**
   * How long a key stays "in progress" if its consumer dies before finishing (L2 only), in ms.
   * Until then other consumers skip the message without acknowledging it. Default 30_000.
   */
  lockMs?: number;
}

/**
 * Skips messages whose key was already processed successfully (and acknowledges them), skips
 * without acknowledging those still in progress, and forgets the key of a failed run so that
 * the retry runs. Applies IdempotencyInterceptor to the handler.
 */
export function Idempotent(options: IdempotentOptions = {}): MethodDecorator & ClassDecorator {
  return applyDecorators(
    SetMetadata(IDEMPOTENT_METADATA, options),
    UseInterceptors(IdempotencyInterceptor),
  );
}
