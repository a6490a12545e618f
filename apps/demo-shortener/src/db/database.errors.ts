/**
 * The database failed (connection refused or lost, a timeout, a lock wait cut short, a file
 * gone): the request cannot be served now, but may be in a moment. Answered 503.
 * `message` is for the log (it carries the driver's reason); clients get a fixed text.
 */
export class DatabaseUnavailableError extends Error {
  readonly code = 'DATABASE_UNAVAILABLE';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DatabaseUnavailableError';
  }
}

/** What a client is told about a DatabaseUnavailableError. */
export const DATABASE_UNAVAILABLE_MESSAGE =
  'Database unavailable: the request was not completed; try again in a few seconds';
