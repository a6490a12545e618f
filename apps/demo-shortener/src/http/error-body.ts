import { STATUS_CODES } from 'node:http';

/** The one JSON shape of every error the app answers, from a handler or from Fastify itself. */
export interface ErrorBody {
  statusCode: number;
  error: string;
  message: string;
}

export function errorBody(statusCode: number, message: string): ErrorBody {
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', message };
}
