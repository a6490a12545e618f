/**
 * Base class of the errors of this library. `code` is stable and safe to match on; `cause`, when
 * set, is the error that led to this one.
 */
export class StreamBatchAckError extends Error {
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An invalid option; thrown when the server or client is created, naming the option. */
export class StreamBatchAckConfigError extends StreamBatchAckError {
  constructor(
    readonly option: string,
    message: string,
  ) {
    super('INVALID_OPTIONS', `Invalid option "${option}": ${message}`);
  }
}

export class AckFlushError extends StreamBatchAckError {
  constructor(
    readonly stream: string,
    readonly ids: readonly string[],
    readonly attempt: number,
    readonly error: unknown,
  ) {
    super(
      'ACK_FLUSH_FAILED',
      `XACK of ${ids.length} id(s) on stream "${stream}" failed (attempt ${attempt}): ${describeError(error)}. ` +
        'The ids stay queued and are retried with backoff; check the Redis connection.',
      { cause: error },
    );
  }
}

export class MalformedEntryError extends StreamBatchAckError {
  constructor(
    readonly stream: string,
    readonly id: string,
    detail: string,
  ) {
    super(
      'MALFORMED_ENTRY',
      `Entry ${id} of stream "${stream}" is malformed: ${detail}. ` +
        'It was moved to the dead-letter stream; fix the producer.',
    );
  }
}

export class MaxDeliveriesExceededError extends StreamBatchAckError {
  constructor(
    readonly stream: string,
    readonly id: string,
    readonly deliveries: number,
    readonly lastError?: string,
  ) {
    super(
      'MAX_DELIVERIES_EXCEEDED',
      `Entry ${id} of stream "${stream}" was delivered ${deliveries} time(s) without success` +
        (lastError ? ` (last error: ${lastError})` : ' (its consumer crashed or timed out)') +
        '. It was moved to the dead-letter stream.',
    );
  }
}

export class NotInitializedError extends StreamBatchAckError {
  constructor(what: string) {
    super(
      'NOT_INITIALIZED',
      `${what} is not initialized. Call "listen"/"startAllMicroservices" (server) or "connect" (client) first.`,
    );
  }
}

/** `send()` got no reply in time. */
export class RequestTimeoutError extends StreamBatchAckError {
  constructor(
    readonly stream: string,
    readonly requestId: string,
    readonly timeoutMs: number,
  ) {
    super(
      'REQUEST_TIMEOUT',
      `No reply to request ${requestId} on stream "${stream}" within ${timeoutMs} ms: is a @MessagePattern('${stream}') consumer running?`,
    );
  }
}

export class NotSupportedError extends StreamBatchAckError {
  constructor(message: string) {
    super('NOT_SUPPORTED', message);
  }
}

/** A short, readable description of anything thrown. */
export function describeError(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  if (typeof err === 'string') return err;
  if (err && typeof err === 'object') {
    const message = (err as { message?: unknown }).message;
    if (typeof message === 'string') return message;
    try {
      return JSON.stringify(err);
    } catch {
      return String(err);
    }
  }
  return String(err);
}
