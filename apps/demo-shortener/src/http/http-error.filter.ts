import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { DATABASE_UNAVAILABLE_MESSAGE, DatabaseUnavailableError } from '../db/database.errors';
import { errorBody } from './error-body';

/** A database outage fails every request: one warning per this many ms, with the count. */
const DATABASE_LOG_INTERVAL_MS = 5000;

/**
 * Fastify's own request errors (Nest hands them over as HttpExceptions with Fastify's text),
 * in words a client can act on.
 */
function clearerMessage(status: number, message: string, bodyLimit: number): string {
  if (status === 413) return `The request body is larger than ${bodyLimit} bytes`;
  if (status === 415) return 'Send the body as JSON with Content-Type: application/json';
  if (status === 400 && /^Body (is not valid JSON|cannot be empty)/.test(message)) {
    return `The request body is not valid JSON (${message}); send {"url": "https://example.com/page"}`;
  }
  return message;
}

/** The client went away (or was cut off by the request timeout) before its request was complete. */
function isClientAbort(exception: unknown, request: FastifyRequest | undefined): boolean {
  if ((exception as { code?: unknown })?.code === 'ECONNRESET') return true;
  const raw = request?.raw;
  return !!raw && (raw.destroyed || !!raw.socket?.destroyed) && !raw.complete;
}

/**
 * Every error as JSON `{ statusCode, error, message }`; a failed database is 503; server
 * errors are logged, not shown; clients that went away are logged at debug level only.
 */
@Catch()
export class HttpErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('Shortener');
  private lastDatabaseLog = 0;
  private databaseFailuresNotLogged = 0;

  constructor(private readonly bodyLimit: number) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const reply = http.getResponse<FastifyReply>();
    const request = http.getRequest<FastifyRequest | undefined>();
    if (isClientAbort(exception, request)) {
      this.logger.debug(
        `client aborted ${request?.method} ${request?.url} before the request was complete ` +
          `(${exception instanceof Error ? exception.message : String(exception)})`,
      );
      return;
    }
    let status = 500;
    let message = 'Internal server error';
    if (exception instanceof DatabaseUnavailableError) {
      status = 503;
      message = DATABASE_UNAVAILABLE_MESSAGE;
      this.logDatabaseFailure(exception);
    } else if (exception instanceof HttpException) {
      status = exception.getStatus();
      const body = exception.getResponse();
      message =
        typeof body === 'string'
          ? body
          : String((body as { message?: unknown }).message ?? exception.message);
      message = clearerMessage(status, message, this.bodyLimit);
    } else {
      this.logger.error(
        exception instanceof Error ? (exception.stack ?? exception.message) : String(exception),
      );
    }
    void reply
      .status(status)
      .header('Content-Type', 'application/json; charset=utf-8')
      .send(errorBody(status, message));
  }

  /** One line (no stack: the cause is outside the app), at most every few seconds. */
  private logDatabaseFailure(err: DatabaseUnavailableError): void {
    const now = Date.now();
    if (now - this.lastDatabaseLog < DATABASE_LOG_INTERVAL_MS) {
      this.databaseFailuresNotLogged++;
      return;
    }
    const more = this.databaseFailuresNotLogged;
    this.lastDatabaseLog = now;
    this.databaseFailuresNotLogged = 0;
    this.logger.warn(
      `503 database unavailable: ${err.message}` +
        (more > 0 ? ` (and ${more} more since the last report)` : ''),
    );
  }
}
