import { Logger } from '@nestjs/common';
import type { FastifyHttpOptions, FastifyReply } from 'fastify';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { HttpConfig } from '../config';
import { errorBody } from './error-body';

const logger = new Logger('Shortener');

/**
 * Fastify's server options from the HTTP settings: body limit, timeouts that close slow or
 * stalled clients, keep-alive limits, and the app's JSON error shape for the errors answered
 * before any route runs (malformed HTTP, request timeout, a malformed %-encoding).
 */
export function fastifyOptions(http: HttpConfig): FastifyHttpOptions<Server> {
  return {
    bodyLimit: http.bodyLimit,
    // Whole request (headers and body) received within this, or 408 and the socket is closed.
    requestTimeout: http.requestTimeoutMs,
    // Socket inactivity while a request is in progress.
    connectionTimeout: http.connectionTimeoutMs,
    keepAliveTimeout: http.keepAliveTimeoutMs,
    maxRequestsPerSocket: http.maxRequestsPerSocket,
    http: {
      headersTimeout: http.requestTimeoutMs,
      // Node checks the request timeouts on this interval (default 30 s, which would let a
      // 10 s timeout run to 40 s): a quarter of the timeout, at most 1 s.
      connectionsCheckingInterval: Math.max(
        50,
        Math.min(1000, Math.floor(http.requestTimeoutMs / 4)),
      ),
    },
    routerOptions: {
      // Longer paths reach the routes, which answer 404 "no such code" (Fastify's default of
      // 100 answers 414); URLs beyond Node's header limit (16 KB) are refused by Node itself.
      maxParamLength: 16 * 1024,
    },
    clientErrorHandler: (err, socket) => clientError(err, socket, http.requestTimeoutMs),
    // Errors Fastify answers itself before routing (a malformed %-encoding in the path).
    frameworkErrors: (err, _request, reply) => {
      void (reply as FastifyReply)
        .status(400)
        .header('Content-Type', 'application/json; charset=utf-8')
        .send(errorBody(400, `The request URL is not valid: ${err.message}`));
    },
  };
}

/**
 * Errors on a connection that never became a request Fastify could route (Node's
 * 'clientError'): a client that went away is logged at debug level only; the others get an
 * answer in the app's JSON shape, then the socket is closed.
 */
function clientError(err: NodeJS.ErrnoException, socket: Socket, requestTimeoutMs: number): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) {
    logger.debug(`client aborted the connection (${err.code ?? err.message})`);
    return;
  }
  let status = 400;
  let message = 'The request is not valid HTTP';
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    message = `The request was not received completely within ${requestTimeoutMs} ms`;
  } else if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    message = 'The request headers are too large';
  }
  logger.debug(`closing a connection: ${status} ${message} (${err.code ?? err.message})`);
  if (socket.writable) {
    const body = JSON.stringify(errorBody(status, message));
    socket.write(
      `HTTP/1.1 ${status} ${errorBody(status, '').error}\r\nConnection: close\r\n` +
        `Content-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
