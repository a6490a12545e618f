import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  Optional,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Observable, Subscription } from 'rxjs';
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

    return this.run(key, options, next, streamsCtx);
  }

  /**
   * begin -> handler -> complete (or fail on any error), as one hand-written Observable: this runs
   * once per message, and a chain of rxjs operators (from, mergeMap, concat, defer, catchError)
   * costs several subscribers and closures per message on a hot consumer.
   */
  private run(
    key: string,
    options: IdempotentOptions,
    next: CallHandler,
    streamsCtx: RedisStreamsContext | undefined,
  ): Observable<unknown> {
    const store = this.store;
    return new Observable<unknown>((subscriber) => {
      let inner: Subscription | undefined;
      let token: string | undefined;
      const fail = (err: unknown): void => {
        if (streamsCtx && !streamsCtx.hasError()) streamsCtx.setError(err);
        store
          .fail(key, token)
          .catch(() => undefined)
          .then(() => subscriber.error(err));
      };
      store.begin(key, options.lockMs).then(
        (begun) => {
          if (subscriber.closed) return;
          if (begun.state !== 'acquired') {
            if (begun.state === 'processing') streamsCtx?.skipAck();
            subscriber.next(undefined);
            subscriber.complete();
            return;
          }
          token = begun.token;
          inner = next.handle().subscribe({
            next: (value) => subscriber.next(value),
            error: fail,
            complete: () => {
              let completed: Promise<void>;
              try {
                completed = store.complete(key, options.ttlMs);
              } catch (err) {
                completed = Promise.reject(err);
              }
              completed.then(() => subscriber.complete(), fail);
            },
          });
        },
        (err: unknown) => subscriber.error(err),
      );
      return () => inner?.unsubscribe();
    });
  }
}
