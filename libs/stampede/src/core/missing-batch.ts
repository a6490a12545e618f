import { StampedeConfigError } from './errors';

/** Loads the values of `keys` in one call: a Record or Map by key; a key left out is a miss. */
export type BatchLoader<T> = (
  keys: string[],
  signal: AbortSignal,
) => Promise<BatchResult<T>> | BatchResult<T>;

export type BatchResult<T> = Record<string, T> | Map<string, T>;

/**
 * Turns one batch loader into per-key loaders, so that each key goes through the same run-and-fill
 * path as getOrLoad's, while the keys asked for together cost one loader call: the keys requested
 * within one turn of the event loop (the flow starts the loads of the keys it won in one loop;
 * waiters woken by replies of one read from Redis run in one turn) are loaded by one call, made
 * in the next (setImmediate). A key requested later starts a new call, with the keys requested
 * alongside it.
 *
 * A key the loader leaves out resolves to `undefined` (a miss, never cached); a loader error, or
 * a result that is neither a Record nor a Map, rejects the keys of that call only.
 */
export class MissingBatch<T> {
  private next: PendingCall<T> | undefined;

  constructor(
    private readonly loadMissing: BatchLoader<T>,
    private readonly where: string,
  ) {}

  /** The per-key loader of `key`. */
  loaderOf(key: string): (signal: AbortSignal) => Promise<T | undefined> {
    return (signal) => this.request(key, signal);
  }

  private request(key: string, signal: AbortSignal): Promise<T | undefined> {
    let call = this.next;
    if (!call) {
      call = this.next = new PendingCall<T>();
      setImmediate(() => {
        this.next = undefined;
        call!.start(this.loadMissing, this.where);
      });
    }
    call.keys.add(key);
    call.signals.push(signal);
    return call.result.then((pick) => pick(key));
  }
}

/** One loader call being gathered: its keys, the signals of the loads waiting on it. */
class PendingCall<T> {
  readonly keys = new Set<string>();
  readonly signals: AbortSignal[] = [];
  readonly result: Promise<(key: string) => T | undefined>;
  private resolve!: (pick: (key: string) => T | undefined) => void;
  private reject!: (err: unknown) => void;

  constructor() {
    this.result = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  start(loadMissing: BatchLoader<T>, where: string): void {
    const controller = new AbortController();
    // The call is aborted once every load waiting on it gave up (their hard timeouts).
    let live = this.signals.length;
    for (const signal of this.signals) {
      const gaveUp = () => {
        if (--live === 0) controller.abort(signal.reason);
      };
      if (signal.aborted) gaveUp();
      else signal.addEventListener('abort', gaveUp, { once: true });
    }
    let running: Promise<BatchResult<T>>;
    try {
      running = Promise.resolve(loadMissing([...this.keys], controller.signal));
    } catch (err) {
      running = Promise.reject(err);
    }
    running.then((result) => this.resolve(picker<T>(result, where)), this.reject);
  }
}

/** Reads one key of a batch loader's result; a result of the wrong shape fails every key. */
function picker<T>(result: unknown, where: string): (key: string) => T | undefined {
  if (result instanceof Map) return (key) => (result as Map<string, T>).get(key);
  if (typeof result === 'object' && result !== null && !Array.isArray(result)) {
    const record = result as Record<string, T>;
    return (key) => (Object.prototype.hasOwnProperty.call(record, key) ? record[key] : undefined);
  }
  const error = new StampedeConfigError(
    `${where}: loadMissing must return a Record or a Map of the keys it was given, got ${
      Array.isArray(result) ? 'an array' : String(result)
    }`,
  );
  return () => {
    throw error;
  };
}
