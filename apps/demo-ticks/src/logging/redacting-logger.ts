import { ConsoleLogger, type LogLevel } from '@nestjs/common';

/**
 * `scheme://user:password@host` becomes `scheme://***@host`, anywhere in a text (a URL in a log
 * line, a driver's error message quoting its connection string). The user info runs to the last
 * `@` before the path, so a password with a raw `@` is hidden whole.
 */
export function redactCredentials(text: string): string {
  return text.replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#]*@/gi, '$1***@');
}

/** Nest's console logger, with the credentials of every URL redacted from every line it prints. */
export class RedactingLogger extends ConsoleLogger {
  constructor(logLevels: LogLevel[]) {
    super({ logLevels });
  }

  protected override formatMessage(...args: Parameters<ConsoleLogger['formatMessage']>): string {
    return redactCredentials(super.formatMessage(...args));
  }

  // Nest calls it with no stack too (`logger.error(message)`).
  protected override printStackTrace(stack: string | undefined): void {
    super.printStackTrace((stack && redactCredentials(stack)) as string);
  }
}
