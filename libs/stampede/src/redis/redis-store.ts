import { Cluster, Redis, RedisOptions } from 'ioredis';
import { Clock, systemClock } from '../core/clock';
import { decodeEnvelope, encodeEnvelope, Envelope } from '../core/envelope';
import { StoreUnavailableError } from '../core/errors';
import type { FillWatch, ReadOrLockResult, StampedeStore } from '../core/store';
import { StampedeKeys } from './keys';
import { EXTEND_LOCK, FILL_AND_UNLOCK, READ_OR_LOCK, SCRIPTS, UNLOCK } from './scripts';

export type RedisConnection = string | RedisOptions | Redis | Cluster;

export interface RedisStoreOptions {
  keyPrefix?: string;
  /** Longest wait for one Redis operation before the call falls back to the loader (ms). Default 500. */
  operationTimeout?: number;
  /** After a timeout, skip Redis for this long (ms) instead of paying the timeout on every call. Default 1000. */
  cooldown?: number;
  clock?: Clock;
}

type Client = Redis | Cluster;
type ScriptClient = Client & Record<string, (...args: (string | number)[]) => Promise<unknown>>;

/** Options for the clients this store creates itself: fail fast rather than queue while Redis is down. */
const OWNED_CLIENT_DEFAULTS: RedisOptions = {
  maxRetriesPerRequest: 1,
  enableOfflineQueue: true,
  connectTimeout: 2000,
  retryStrategy: (times) => Math.min(times * 100, 2000),
};

export function isRedisClient(value: unknown): value is Client {
  return value instanceof Redis || value instanceof Cluster;
}

/**
 * The distributed store: envelopes in Redis, locks by `SET NX PX` with a random token and Lua
 * compare-and-act, fill notifications over one pub/sub connection per store.
 * Clients passed in by the app are used but not closed; clients it creates are closed by close().
 */
export class RedisStore implements StampedeStore {
  readonly name = 'redis';
  readonly distributed = true;
  readonly keys: StampedeKeys;
  readonly client: Client;
  private readonly subscriber: Client;
  private readonly ownsClient: boolean;
  private readonly timeoutMs: number;
  private readonly cooldownMs: number;
  private readonly clock: Clock;
  private readonly watchers = new Map<string, Set<() => void>>();
  private downUntil = 0;
  private closed = false;

  constructor(connection: RedisConnection, options: RedisStoreOptions = {}) {
    this.keys = new StampedeKeys(options.keyPrefix ?? 'stampede:');
    this.timeoutMs = options.operationTimeout ?? 500;
    this.cooldownMs = options.cooldown ?? 1000;
    this.clock = options.clock ?? systemClock;
    if (isRedisClient(connection)) {
      this.client = connection;
      this.ownsClient = false;
    } else if (typeof connection === 'string') {
      this.client = new Redis(connection, OWNED_CLIENT_DEFAULTS);
      this.ownsClient = true;
    } else {
      this.client = new Redis({ ...OWNED_CLIENT_DEFAULTS, ...connection });
      this.ownsClient = true;
    }
    // Errors surface on each call; without a listener ioredis would print every reconnect attempt.
    if (this.ownsClient) this.client.on('error', () => undefined);
    for (const script of SCRIPTS) {
      if (!(script.name in this.client)) {
        this.client.defineCommand(script.name, {
          numberOfKeys: script.numberOfKeys,
          lua: script.lua,
        });
      }
    }
    this.subscriber =
      this.client instanceof Cluster ? this.client.duplicate() : this.client.duplicate();
    this.subscriber.on('error', () => undefined);
    this.subscriber.on('message', (channel: string, key: string) => {
      if (channel === this.keys.channel) this.notify(key);
    });
    // A lost subscription would strand waiters until their lock expires: wake them so they poll.
    this.subscriber.on('close', () => this.notifyAll());
    this.subscriber.subscribe(this.keys.channel).catch(() => undefined);
  }

  /** Resolves once both connections are ready, or after `timeoutMs` (then calls fall back to the loader until Redis answers). */
  async waitUntilReady(timeoutMs = 2000): Promise<boolean> {
    // A client created with lazyConnect waits for its first command; a store needs it connected.
    for (const c of [this.client, this.subscriber])
      if (c.status === 'wait') c.connect().catch(() => undefined);
    const ready = (c: Client) =>
      c.status === 'ready'
        ? Promise.resolve()
        : new Promise<void>((resolve) => c.once('ready', () => resolve()));
    const timer = new Promise<false>((resolve) =>
      setTimeout(() => resolve(false), timeoutMs).unref(),
    );
    return Promise.race([
      Promise.all([ready(this.client), ready(this.subscriber)]).then(() => true),
      timer,
    ]);
  }

  async get<T>(key: string): Promise<Envelope<T> | undefined> {
    return decodeEnvelope<T>(await this.call(() => this.client.get(this.keys.value(key))));
  }

  async set(key: string, envelope: Envelope, ttlMs: number): Promise<void> {
    await this.call(() =>
      this.client.set(this.keys.value(key), encodeEnvelope(envelope), 'PX', ttlMs),
    );
  }

  async delete(key: string): Promise<void> {
    await this.call(() => this.client.del(this.keys.value(key)));
  }

  async readOrLock<T>(key: string, token: string, lockTtlMs: number): Promise<ReadOrLockResult<T>> {
    const reply = (await this.call(
      () =>
        (this.client as ScriptClient)[READ_OR_LOCK.name](
          this.keys.value(key),
          this.keys.lock(key),
          token,
          lockTtlMs,
        ),
      (late) => {
        if ((late as [number])[0] === 2) this.releaseAbandoned(key, token);
      },
    )) as [number, (string | number)?];
    if (reply[0] === 1) {
      const envelope = decodeEnvelope<T>(reply[1] as string);
      if (envelope) return { kind: 'hit', envelope };
      // A corrupt value: drop it and compete for the lock as on a miss.
      await this.delete(key);
      return this.readOrLock(key, token, lockTtlMs);
    }
    if (reply[0] === 2) return { kind: 'locked' };
    return { kind: 'busy', lockTtlMs: Number(reply[1]) };
  }

  async tryLock(key: string, token: string, lockTtlMs: number): Promise<boolean> {
    const reply = await this.call(
      () => this.client.set(this.keys.lock(key), token, 'PX', lockTtlMs, 'NX'),
      (late) => {
        if (late === 'OK') this.releaseAbandoned(key, token);
      },
    );
    return reply === 'OK';
  }

  /**
   * A lock attempt that timed out is not cancelled: when Redis catches up, it may still take the
   * lock for a caller that has gone (and answered from its loader). Release it at once, so that
   * nobody waits on a lock whose owner gave up. Sent on the raw client, past the cool-down: the
   * connection just answered.
   */
  private releaseAbandoned(key: string, token: string): void {
    if (this.closed) return;
    const unlock = (this.client as ScriptClient)[UNLOCK.name];
    unlock
      .call(this.client, this.keys.lock(key), token, this.keys.channel, key)
      .catch(() => undefined);
  }

  async extendLock(key: string, token: string, lockTtlMs: number): Promise<boolean> {
    return (await this.script(EXTEND_LOCK.name, this.keys.lock(key), token, lockTtlMs)) === 1;
  }

  async unlock(key: string, token: string): Promise<boolean> {
    return (
      (await this.script(UNLOCK.name, this.keys.lock(key), token, this.keys.channel, key)) === 1
    );
  }

  async fill(key: string, envelope: Envelope, ttlMs: number, token?: string): Promise<void> {
    if (!token) return this.set(key, envelope, ttlMs);
    await this.script(
      FILL_AND_UNLOCK.name,
      this.keys.value(key),
      this.keys.lock(key),
      encodeEnvelope(envelope),
      ttlMs,
      token,
      this.keys.channel,
      key,
    );
  }

  watch(key: string): FillWatch {
    let wake!: () => void;
    const done = new Promise<void>((resolve) => (wake = resolve));
    let set = this.watchers.get(key);
    if (!set) {
      set = new Set();
      this.watchers.set(key, set);
    }
    set.add(wake);
    return {
      done,
      cancel: () => {
        const current = this.watchers.get(key);
        current?.delete(wake);
        if (current?.size === 0) this.watchers.delete(key);
        wake();
      },
    };
  }

  notificationsLive(): boolean {
    return this.subscriber.status === 'ready';
  }

  /** Asks Redis itself, ignoring the cool-down, so a health check sees the truth. */
  async ping(): Promise<void> {
    await this.withTimeout(this.client.ping(), 'PING');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.notifyAll();
    await quit(this.subscriber);
    if (this.ownsClient) await quit(this.client);
  }

  private script(name: string, ...args: (string | number)[]): Promise<unknown> {
    return this.call(() => (this.client as ScriptClient)[name](...args));
  }

  /**
   * Fails fast while Redis is known down, bounds every call by the operation timeout.
   * `onAbandoned` gets the reply of a command that answered after its timeout.
   */
  private async call<T>(op: () => Promise<T>, onAbandoned?: (late: T) => void): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('the Redis store is closed');
    if (this.client.status !== 'ready') {
      throw new StoreUnavailableError(`Redis connection is ${this.client.status}`);
    }
    if (this.clock.now() < this.downUntil) {
      throw new StoreUnavailableError('Redis timed out recently; skipping it for a moment');
    }
    try {
      return await this.withTimeout(op(), 'command', onAbandoned);
    } catch (err) {
      if (err instanceof StoreUnavailableError) this.downUntil = this.clock.now() + this.cooldownMs;
      throw err instanceof StoreUnavailableError
        ? err
        : new StoreUnavailableError(messageOf(err), err);
    }
  }

  private withTimeout<T>(
    promise: Promise<T>,
    what: string,
    onAbandoned?: (late: T) => void,
  ): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        if (onAbandoned) promise.then(onAbandoned, () => undefined);
        reject(new StoreUnavailableError(`Redis ${what} took longer than ${this.timeoutMs} ms`));
      }, this.timeoutMs);
    });
    promise.catch(() => undefined); // a late rejection after the timeout is not unhandled
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
  }

  private notify(key: string): void {
    const set = this.watchers.get(key);
    if (!set) return;
    this.watchers.delete(key);
    for (const wake of set) wake();
  }

  private notifyAll(): void {
    for (const key of [...this.watchers.keys()]) this.notify(key);
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function quit(client: Client): Promise<void> {
  try {
    if (client.status === 'end') return;
    if (client.status === 'ready') await client.quit();
    else client.disconnect();
  } catch {
    client.disconnect();
  }
}
