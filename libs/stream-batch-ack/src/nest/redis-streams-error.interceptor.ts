import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import { Observable, throwError } from 'rxjs';
import { catchError } from 'rxjs/operators';
import { RedisStreamsBatchContext, RedisStreamsContext } from '../transport/redis-streams.context';

/**
 * Keeps the original error of a failed handler on its RedisStreamsContext, so that the
 * dead-letter entry says what went wrong (Nest's default RPC exception filter replaces unknown
 * errors by "Internal server error"). RedisStreamsModule registers it globally.
 */
@Injectable()
export class RedisStreamsErrorInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'rpc') return next.handle();
    const ctx = context.switchToRpc().getContext();
    if (!(ctx instanceof RedisStreamsContext) && !(ctx instanceof RedisStreamsBatchContext))
      return next.handle();
    return next.handle().pipe(
      catchError((err) => {
        if (!ctx.hasError()) ctx.setError(err);
        return throwError(() => err);
      }),
    );
  }
}
