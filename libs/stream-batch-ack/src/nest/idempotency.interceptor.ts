import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  Optional,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { concat, defer, EMPTY, from, Observable, of, throwError } from 'rxjs';
import { catchError, mergeMap } from 'rxjs/operators';
import { RedisStreamsContext } from '../transport/redis-streams.context';
import type { IdempotentOptions } from './idempotent.decorator';
import { IDEMPOTENT_METADATA } from './redis-streams.constants';
import { IdempotencyStore } from './idempotency.store';

const SEEN = Symbol('stream-batch-ack:idempotency-seen');

/**
 * Runs a `@Idempotent()` handler at most once per key with success: a key already done is skipped
 * (and the message acknowledged), a key in progress elsewhere is skipped without acknowledgement,
 * a failed run forgets its key. Handlers without `@Idempotent()` pass through.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly store: IdempotencyStore;

  constructor(
    private readonly reflector: Reflector,
    @Optional() store?: IdempotencyStore,
  ) {
    this.store = store ?? new IdempotencyStore();
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'rpc') return next.handle();
    const options =
      this.reflector.get<IdempotentOptions | undefined>(
        IDEMPOTENT_METADATA,
        context.getHandler(),
      ) ??
      this.reflector.get<IdempotentOptions | undefined>(IDEMPOTENT_METADATA, context.getClass());
    if (!options) return next.handle();
    const rpc = context.switchToRpc();
    const ctx = rpc.getContext<Record<symbol, unknown>>();
    const data = rpc.getData();
    // Registered globally and by the decorator: run once.
    if (ctx && typeof ctx === 'object') {
      if (ctx[SEEN]) return next.handle();
      ctx[SEEN] = true;
    }
    const streamsCtx = ctx instanceof RedisStreamsContext ? ctx : undefined;
    let key: string;
    if (options.key) key = options.key(data, ctx);
    else if (streamsCtx) key = `${streamsCtx.stream}:${streamsCtx.id}`;
    else return next.handle();
    if (streamsCtx) key = `${streamsCtx.group}:${key}`;

    return from(this.store.begin(key, options.lockMs)).pipe(
      mergeMap(({ state, token }) => {
        if (state === 'done') return of(undefined);
        if (state === 'processing') {
          streamsCtx?.skipAck();
          return of(undefined);
        }
        return concat(
          next.handle(),
          defer(() => from(this.store.complete(key, options.ttlMs))).pipe(mergeMap(() => EMPTY)),
        ).pipe(
          catchError((err) => {
            if (streamsCtx && !streamsCtx.hasError()) streamsCtx.setError(err);
            return from(this.store.fail(key, token).catch(() => undefined)).pipe(
              mergeMap(() => throwError(() => err)),
            );
          }),
        );
      }),
    );
  }
}
