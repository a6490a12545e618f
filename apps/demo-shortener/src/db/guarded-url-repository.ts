import { DatabaseUnavailableError } from './database.errors';
import type { InsertResult, UrlRecord, UrlRepository } from './url-repository';

/** Told about every database call: its name, how long it took (seconds), and whether it failed. */
export type QueryObserver = (operation: string, seconds: number, failed: boolean) => void;

export interface GuardOptions {
  /**
   * Longest wait for one call, ms: then the caller gets a DatabaseUnavailableError while the
   * call may still finish in the background (a write may then be stored all the same; posting
   * the URL again returns its code). Default: no deadline.
   */
  deadlineMs?: number;
  observe?: QueryObserver;
}

/**
 * The adapter as the app sees it: any failure of a call (driver error, timeout, lost
 * connection) becomes a DatabaseUnavailableError, which the HTTP layer answers with 503; no
 * call waits longer than the deadline; every call is timed for the metrics. Outcomes that are
 * not failures (a duplicate URL, a taken code) are results of the adapter, not errors, so they
 * pass through unchanged.
 */
export class GuardedUrlRepository implements UrlRepository {
  private readonly deadlineMs?: number;
  private readonly observe: QueryObserver;

  constructor(
    private readonly inner: UrlRepository,
    options: GuardOptions = {},
  ) {
    this.deadlineMs = options.deadlineMs;
    this.observe = options.observe ?? (() => undefined);
  }

  get kind(): string {
    return this.inner.kind;
  }

  get databaseId(): string {
    return this.inner.databaseId;
  }

  init(): Promise<void> {
    return this.run('init', () => this.inner.init());
  }

  insertSequential(
    url: string,
    urlHash: string,
    encode: (id: bigint) => string,
  ): Promise<InsertResult> {
    return this.run('insert_sequential', () => this.inner.insertSequential(url, urlHash, encode));
  }

  insertWithCode(code: string, url: string, urlHash: string): Promise<InsertResult> {
    return this.run('insert_with_code', () => this.inner.insertWithCode(code, url, urlHash));
  }

  findByCode(code: string): Promise<UrlRecord | null> {
    return this.run('find_by_code', () => this.inner.findByCode(code));
  }

  findByUrlHash(urlHash: string): Promise<UrlRecord | null> {
    return this.run('find_by_url_hash', () => this.inner.findByUrlHash(urlHash));
  }

  codeExists(code: string): Promise<boolean> {
    return this.run('code_exists', () => this.inner.codeExists(code));
  }

  recent(limit: number): Promise<UrlRecord[]> {
    return this.run('recent', () => this.inner.recent(limit));
  }

  ping(): Promise<void> {
    return this.run('ping', () => this.inner.ping());
  }

  dropTable(): Promise<void> {
    return this.inner.dropTable();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private async run<T>(operation: string, work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      const result = await (this.deadlineMs === undefined
        ? work()
        : Promise.race([
            work(),
            new Promise<never>((_, reject) => {
              timer = setTimeout(
                () => reject(new Error(`no answer within ${this.deadlineMs} ms`)),
                this.deadlineMs,
              );
            }),
          ]));
      this.observe(operation, (performance.now() - started) / 1000, false);
      return result;
    } catch (err) {
      this.observe(operation, (performance.now() - started) / 1000, true);
      if (err instanceof DatabaseUnavailableError) throw err;
      const reason = err instanceof Error ? err.message : String(err);
      throw new DatabaseUnavailableError(`${this.inner.kind} ${operation} failed: ${reason}`, {
        cause: err,
      });
    } finally {
      clearTimeout(timer);
    }
  }
}
