import type { ModuleRef } from '@nestjs/core';

/** What the bridge needs of @nestjs/event-emitter's EventEmitter2. */
export interface EventSink {
  emit(event: string, ...values: unknown[]): boolean;
}

/**
 * The app's EventEmitter2, when it imported `EventEmitterModule.forRoot()`; else undefined.
 * @nestjs/event-emitter is an optional peer: it is required here, lazily, for its token only.
 */
export function findEventEmitter(moduleRef: ModuleRef): EventSink | undefined {
  let token: unknown;
  try {
    token = (require('@nestjs/event-emitter') as { EventEmitter2?: unknown }).EventEmitter2;
  } catch {
    return undefined; // not installed
  }
  if (typeof token !== 'function') return undefined;
  try {
    const emitter = moduleRef.get(token as new () => EventSink, { strict: false });
    return typeof emitter?.emit === 'function' ? emitter : undefined;
  } catch {
    return undefined; // installed, but EventEmitterModule is not imported by this app
  }
}
