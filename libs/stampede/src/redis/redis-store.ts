import { randomUUID } from 'node:crypto';
import { ChainableCommander, Cluster, Redis, RedisOptions, ReplyError } from 'ioredis';
import { Clock, systemClock } from '../core/clock';
import { defaultCodec, Envelope, EnvelopeCodec, sameEnvelope } from '../core/envelope';
import { StoreUnavailableError } from '../core/errors';
import type {
  FillWatch,
  InvalidationMessage,
  ReadOrLockResult,
  StampedeStore,
} from '../core/store';
import { StampedeKeys } from './keys';
import {
  EXTEND_LOCK,
  INVALIDATE,
  READ_OR_WAIT,
  SCRIPTS,
  TAG_BUMP,
  TAG_VERSION,
  UNLOCK,
  WAITING,
} from './scripts';

export type RedisConnection = string | RedisOptions | Redis | Cluster;

export interface RedisStoreOptions {
  keyPrefix?: string;
  /** Longest wait for one Redis operation before the call falls back to the loader (ms). Default 500. */
  operationTimeout?: number;
  /** After a timeout, skip Redis for this long (ms) instead of paying the timeout on every call. Default 1000. */
  cooldown?: number;
  clock?: Clock;
  /** How envelopes are written; default JSON. */
  codec?: EnvelopeCodec;
}

type Client = Redis | Cluster;
type ScriptClient = Client & Record<string, (...args: (string | number)[]) => Promise<unknown>>;

/** Options for the clients this store creates itself: fail fast rather than queue while Redis is down. */
const OWNED_CLIENT_DEFAULTS: RedisOptions = {
  maxRetriesPerRequest: 1,
  enableOfflineQueue: true,
  connectTimeout: 2000,
  retryStrategy: (times) => Math.min(times * 100, 2000),
  // ioredis waits this long for a socket that never connected to close (default 2000 ms): it
  // kept app.close() and the process 2 s longer while Redis refused connections.
  disconnectTimeout: 500,
};

export function isRedisClient(value: unknown): value is Client {
  return value instanceof Redis || value instanceof Cluster;
}

/** The connection's publish/subscribe verbs: sharded pub/sub on a Cluster keeps a key's notifications on its shard. */
interface PubSubVerbs {
  publish: 'publish' | 'spublish';
  subscribe: 'subscribe' | 'ssubscribe';
  unsubscribe: 'unsubscribe' | 'sunsubscribe';
  message: 'message' | 'smessage';
}

const PLAIN_PUBSUB: PubSubVerbs = {
  publish: 'publish',
  subscribe: 'subscribe',
  unsubscribe: 'unsubscribe',
  message: 'message',
};
const SHARDED_PUBSUB: PubSubVerbs = {
  publish: 'spublish',
  subscribe: 'ssubscribe',
  unsubscribe: 'sunsubscribe',
  message: 'smessage',
};

/** The instances of one process that wait for one key, and that key's channel subscription. */
interface Subscription {
  wakes: Set<() => void>;
  /** True once subscribed; false if the subscription could not be made in time. */
  ready: Promise<boolean>;
  dropTimer?: NodeJS.Immediate;
}

/**
 * The distributed store: envelopes in Redis, locks by `SET NX PX` with a random token, and fill
 * notifications on one channel per key, which only the instances waiting for that key subscribe
 * to (sharded pub/sub on a Cluster). A fill publishes only when the lock says someone waits.
 * Clients passed in by the app are used but not closed; clients it creates are closed by close().
 */
export class RedisStore implements StampedeStore {
  readonly name = 'redis';
  readonly distributed = true;
  readonly keys: StampedeKeys;
  readonly client: Client;
  private readonly subscriber: Client;
  private readonly pubsub: PubSubVerbs;
  private readonly ownsClient: boolean;
  private readonly timeoutMs: number;
  private readonly cooldownMs: number;
  private readonly clock: Clock;
  readonly codec: EnvelopeCodec;
  private readonly subscriptions = new Map<string, Subscription>();
  private received = 0;
  /** Resolves once the invalidation bus is first subscribed. */
  private readonly busSubscribed: Promise<void>;
  /** Since when the bus is not subscribed (from the start until the first subscription). */
  private busDownSince: number | undefined;
  private readonly instanceId = randomUUID();
  private readonly invalidationListeners: {
    listener: (message: InvalidationMessage) => void;
    reset: () => void;
    busChanged?: (downSince: number | undefined) => void;
  }[] = [];
  private downUntil = 0;
  /** Gives up one call in flight (see call()). */
  private readonly inFlight = new Set<(reason: string) => void>();
  private closed = false;

  constructor(connection: RedisConnection, options: RedisStoreOptions = {}) {
    this.keys = new StampedeKeys(options.keyPrefix ?? 'stampede:');
    this.timeoutMs = options.operationTimeout ?? 500;
    this.cooldownMs = options.cooldown ?? 1000;
    this.clock = options.clock ?? systemClock;
    this.codec = options.codec ?? defaultCodec;
    this.busDownSince = this.clock.now();
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
    if (this.client instanceof Cluster) {
      this.pubsub = SHARDED_PUBSUB;
      this.subscriber = this.client.duplicate(undefined, { shardedSubscribers: true });
    } else {
      this.pubsub = PLAIN_PUBSUB;
      this.subscriber = this.client.duplicate();
    }
    this.subscriber.on('error', () => undefined);
    this.subscriber.on(this.pubsub.message, (channel: string) => {
      const key = this.keys.keyOfChannel(channel);
      if (key === undefined) return;
      this.received++;
      this.notify(key);
    });
    this.subscriber.on('message', (channel: string, text: string) => {
      if (channel === this.keys.bus) this.receive(text);
    });
    // A lost subscription would strand waiters until their lock expires: wake them so they poll.
    // Invalidations are missed from now on: the listeners are told.
    this.subscriber.on('close', () => {
      this.notifyAll();
      this.busDown();
    });
    // The bus is up once its SUBSCRIBE answers: after ioredis' own resubscription, which it
    // sends first on a reconnect (this one also covers a first SUBSCRIBE that failed).
    // Invalidations sent while the subscriber was away are lost: the listeners start afresh.
    let connectedBefore = false;
    let subscribed!: () => void;
    this.busSubscribed = new Promise((resolve) => (subscribed = resolve));
    this.subscriber.on('ready', () => {
      this.subscriber.subscribe(this.keys.bus).then(
        () => {
          if (this.closed || this.subscriber.status !== 'ready') return;
          if (connectedBefore) for (const l of this.invalidationListeners) l.reset();
          connectedBefore = true;
          this.busUp();
          subscribed();
        },
        () => undefined,
      );
    });
    // Also connects a subscriber made with lazyConnect (a duplicate of such a client).
    this.subscriber.subscribe(this.keys.bus).catch(() => undefined);
  }

  broadcast(message: InvalidationMessage): Promise<void> {
    return this.call(() => this.client.publish(this.keys.bus, this.busText(message))).then(
      () => undefined,
    );
  }

  /**
   * DEL and PUBLISH in one script: a delete that Redis carries out after the call gave up is
   * broadcast all the same, and applied here too (this process skips its own messages).
   */
  async invalidate(key: string): Promise<void> {
    const message: InvalidationMessage = { keys: [key] };
    await this.call(
      () =>
        (this.client as ScriptClient)[INVALIDATE.name](
          this.keys.value(key),
          this.keys.bus,
          this.busText(message),
        ),
      () => this.deliver(message),
    );
  }

  onInvalidation(
    listener: (message: InvalidationMessage) => void,
    reset: () => void,
    busChanged?: (downSince: number | undefined) => void,
  ): void {
    this.invalidationListeners.push({ listener, reset, busChanged });
  }

  invalidationsDownSince(): number | undefined {
    return this.busDownSince;
  }

  private busText(message: InvalidationMessage): string {
    return JSON.stringify({ ...message, from: this.instanceId });
  }

  private deliver(message: InvalidationMessage): void {
    for (const l of this.invalidationListeners) l.listener(message);
  }

  private busDown(): void {
    if (this.closed || this.busDownSince !== undefined) return;
    const since = this.clock.now();
    this.busDownSince = since;
    for (const l of this.invalidationListeners) l.busChanged?.(since);
  }

  private busUp(): void {
    if (this.busDownSince === undefined) return;
    this.busDownSince = undefined;
    for (const l of this.invalidationListeners) l.busChanged?.(undefined);
  }

  tagVersions(tags: string[], floors: number[]): Promise<number[]> {
    return this.tagScript(TAG_VERSION.name, tags, floors);
  }

  bumpTags(tags: string[], floors: number[]): Promise<number[]> {
    return this.tagScript(TAG_BUMP.name, tags, floors);
  }

  /**
   * TAG_BUMP and PUBLISH in one script per tag (on the tag's node, on a Cluster): a version set
   * after the call gave up is broadcast all the same, and applied here too.
   */
  invalidateTags(tags: string[], floors: number[]): Promise<number[]> {
    return Promise.all(
      tags.map(async (tag, i) => {
        // The text of busText({ tags: { [tag]: version } }), the version written by the script.
        const before = `{"from":${JSON.stringify(this.instanceId)},"tags":{${JSON.stringify(tag)}:`;
        const version = await this.call(
          () =>
            (this.client as ScriptClient)[TAG_BUMP.name](
              this.keys.tag(tag),
              floors[i],
              this.keys.bus,
              before,
              '}}',
            ),
          (late) => this.deliver({ tags: { [tag]: Number(late) } }),
        );
        return Number(version);
      }),
    );
  }

  /** One script call per tag: tags live in different slots on a Cluster. */
  private tagScript(name: string, tags: string[], floors: number[]): Promise<number[]> {
    return Promise.all(
      tags.map(async (tag, i) => Number(await this.script(name, this.keys.tag(tag), floors[i]))),
    );
  }

  private receive(text: string): void {
    let message: InvalidationMessage & { from?: string };
    try {
      message = JSON.parse(text) as InvalidationMessage & { from?: string };
    } catch {
      return;
    }
    if (message.from === this.instanceId) return; // applied when sent
    this.deliver(message);
  }

  /** Fill notifications this store has received: about one per wait of this process, whatever the other instances fill. */
  get notificationsReceived(): number {
    return this.received;
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
      Promise.all([ready(this.client), ready(this.subscriber), this.busSubscribed]).then(
        () => true,
      ),
      timer,
    ]);
  }

  async get<T>(key: string): Promise<Envelope<T> | undefined> {
    return this.codec.decode<T>(await this.call(() => this.client.get(this.keys.value(key))));
  }

  async set(key: string, envelope: Envelope, ttlMs: number, raw?: string): Promise<void> {
    const text = raw ?? this.codec.encode(envelope);
    await this.call(() => this.client.set(this.keys.value(key), text, 'PX', ttlMs));
  }

  async delete(key: string): Promise<void> {
    await this.call(() => this.client.del(this.keys.value(key)));
  }

  /**
   * A first attempt is one round trip of two commands: `SET lock NX PX` and GET of the value
   * (a fill may have landed since the caller's read). A waiting attempt runs READ_OR_WAIT,
   * which also marks the lock as waited for.
   */
  async readOrLock<T>(
    key: string,
    token: string,
    lockTtlMs: number,
    waiting = false,
  ): Promise<ReadOrLockResult<T>> {
    if (waiting) return this.readOrWait(key, token, lockTtlMs);
    const [locked, raw] = await this.call(
      () => this.lockAndRead(key, token, lockTtlMs),
      ([lateLocked]) => {
        if (lateLocked) this.releaseQuietly(key, token);
      },
    );
    const envelope = this.codec.decode<T>(raw);
    if (envelope) {
      if (locked) this.releaseQuietly(key, token);
      return { kind: 'hit', envelope };
    }
    // A corrupt value is a miss: the holder's fill overwrites it.
    return locked ? { kind: 'locked' } : { kind: 'busy', lockTtlMs: -1 };
  }

  private async readOrWait<T>(
    key: string,
    token: string,
    lockTtlMs: number,
  ): Promise<ReadOrLockResult<T>> {
    const reply = (await this.call(
      () =>
        (this.client as ScriptClient)[READ_OR_WAIT.name](
          this.keys.value(key),
          this.keys.lock(key),
          token,
          lockTtlMs,
        ),
      (late) => {
        if ((late as [number])[0] === 2) this.releaseQuietly(key, token);
      },
    )) as [number, (string | number)?];
    if (reply[0] === 1) {
      const envelope = this.codec.decode<T>(reply[1] as string);
      if (envelope) return { kind: 'hit', envelope };
      // A corrupt value: drop it and compete for the lock as on a miss.
      await this.delete(key);
      return this.readOrWait(key, token, lockTtlMs);
    }
    if (reply[0] === 2) return { kind: 'locked' };
    return { kind: 'busy', lockTtlMs: Number(reply[1]) };
  }

  async tryLock(
    key: string,
    token: string,
    lockTtlMs: number,
    current?: Envelope,
  ): Promise<boolean> {
    const [locked, raw] = await this.call(
      () => this.lockAndRead(key, token, lockTtlMs),
      ([lateLocked]) => {
        if (lateLocked) this.releaseQuietly(key, token);
      },
    );
    if (locked && current && !sameEnvelope(this.codec.decode(raw), current)) {
      // Refreshed by someone else since the caller read it: this expiry is already dealt with.
      this.releaseQuietly(key, token);
      return false;
    }
    return locked;
  }

  private async lockAndRead(
    key: string,
    token: string,
    lockTtlMs: number,
  ): Promise<[boolean, string | null]> {
    const [set, raw] = await replies(
      this.client
        .pipeline()
        .set(this.keys.lock(key), token, 'PX', lockTtlMs, 'NX')
        .get(this.keys.value(key)),
    );
    return [set === 'OK', (raw as string | null) ?? null];
  }

  /**
   * Releases a lock this caller took but does not need: a lock attempt that answered after its
   * timeout (the caller has gone and answered from its loader), or one that found the value
   * filled meanwhile. Nobody must wait on a lock whose owner gave up. Sent on the raw client,
   * past the cool-down: the connection just answered.
   */
  private releaseQuietly(key: string, token: string): void {
    if (this.closed) return;
    const unlock = (this.client as ScriptClient)[UNLOCK.name];
    unlock.call(this.client, ...this.unlockArgs(key, token)).catch(() => undefined);
  }

  async extendLock(key: string, token: string, lockTtlMs: number): Promise<boolean> {
    return (await this.script(EXTEND_LOCK.name, this.keys.lock(key), token, lockTtlMs)) === 1;
  }

  async unlock(key: string, token: string): Promise<boolean> {
    return (await this.script(UNLOCK.name, ...this.unlockArgs(key, token))) === 1;
  }

  private unlockArgs(key: string, token: string): string[] {
    return [this.keys.lock(key), token, this.pubsub.publish, this.keys.channel(key), key];
  }

  /**
   * With `token`: one round trip of SET and GETDEL of the lock, then a PUBLISH only if the lock
   * was marked as waited for. GETDEL releases the lock whoever holds it: a late holder's fill
   * stores a fresh value, so callers are served and no lock is left waiting for a fill.
   */
  async fill(
    key: string,
    envelope: Envelope,
    ttlMs: number,
    token?: string,
    raw?: string,
  ): Promise<void> {
    if (!token) return this.set(key, envelope, ttlMs, raw);
    const text = raw ?? this.codec.encode(envelope);
    const [, holder] = await this.call(() =>
      replies(
        this.client
          .pipeline()
          .set(this.keys.value(key), text, 'PX', ttlMs)
          .getdel(this.keys.lock(key)),
      ),
    );
    if (typeof holder === 'string' && holder.endsWith(WAITING)) {
      await this.call(() => this.client[this.pubsub.publish](this.keys.channel(key), key));
    }
  }

  watch(key: string): FillWatch {
    let sub = this.subscriptions.get(key);
    if (!sub) {
      sub = { wakes: new Set(), ready: this.subscribe(key) };
      this.subscriptions.set(key, sub);
    } else if (sub.dropTimer) {
      clearImmediate(sub.dropTimer);
      sub.dropTimer = undefined;
    }
    let wake!: () => void;
    const done = new Promise<void>((resolve) => (wake = resolve));
    sub.wakes.add(wake);
    const owner = sub;
    return {
      ready: sub.ready,
      done,
      cancel: () => {
        wake();
        owner.wakes.delete(wake);
        if (owner.wakes.size === 0 && !owner.dropTimer) {
          // Unsubscribe a moment later: a waiter that goes on waiting re-watches at once.
          owner.dropTimer = setImmediate(() => this.drop(key, owner));
        }
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
    for (const sub of this.subscriptions.values()) if (sub.dropTimer) clearImmediate(sub.dropTimer);
    this.subscriptions.clear();
    await quit(this.subscriber);
    if (this.ownsClient) await quit(this.client);
  }

  private async subscribe(key: string): Promise<boolean> {
    if (this.closed || this.subscriber.status !== 'ready') return false;
    try {
      await this.withTimeout(
        this.subscriber[this.pubsub.subscribe](this.keys.channel(key)),
        'SUBSCRIBE',
      );
      return true;
    } catch {
      return false;
    }
  }

  private drop(key: string, sub: Subscription): void {
    sub.dropTimer = undefined;
    if (sub.wakes.size > 0 || this.subscriptions.get(key) !== sub) return;
    this.subscriptions.delete(key);
    if (this.closed || this.subscriber.status !== 'ready') return;
    this.subscriber[this.pubsub.unsubscribe](this.keys.channel(key)).catch(() => undefined);
  }

  private script(name: string, ...args: (string | number)[]): Promise<unknown> {
    return this.call(() => (this.client as ScriptClient)[name](...args));
  }

  /**
   * Fails fast while Redis is known down, bounds every call by the operation timeout.
   * `onAbandoned` gets the reply of a command that answered after its timeout. The first call
   * that times out gives up the other calls in flight too: they were sent to the same stalled
   * server, and each waiting out its own timeout would hold its caller up to twice as long.
   */
  private async call<T>(op: () => Promise<T>, onAbandoned?: (late: T) => void): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('the Redis store is closed');
    if (this.client.status !== 'ready') {
      throw new StoreUnavailableError(`Redis connection is ${this.client.status}`);
    }
    if (this.clock.now() < this.downUntil) {
      throw new StoreUnavailableError('Redis timed out recently; skipping it for a moment');
    }
    const call = this.withTimeout(op(), 'command', onAbandoned, true);
    try {
      return await call;
    } catch (err) {
      // An error reply means Redis refused the command; any other failure leaves it unknown.
      throw err instanceof StoreUnavailableError
        ? err
        : new StoreUnavailableError(messageOf(err), err, !(err instanceof ReplyError));
    }
  }

  private withTimeout<T>(
    promise: Promise<T>,
    what: string,
    onAbandoned?: (late: T) => void,
    stallsOthers = false,
  ): Promise<T> {
    promise.catch(() => undefined); // a late rejection after the timeout is not unhandled
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const abandon = (reason: string) => {
        if (settled) return;
        settled = true;
        this.inFlight.delete(abandon);
        clearTimeout(timer);
        if (onAbandoned) promise.then(onAbandoned, () => undefined);
        reject(new StoreUnavailableError(reason, undefined, true)); // sent: it may still run
      };
      const timer = setTimeout(() => {
        abandon(`Redis ${what} took longer than ${this.timeoutMs} ms`);
        if (stallsOthers) this.stalled();
      }, this.timeoutMs);
      if (stallsOthers) this.inFlight.add(abandon);
      const settle = () => {
        if (settled) return false;
        settled = true;
        clearTimeout(timer);
        this.inFlight.delete(abandon);
        return true;
      };
      promise.then(
        (value) => {
          if (settle()) resolve(value);
        },
        (err: unknown) => {
          if (settle()) reject(err);
        },
      );
    });
  }

  /** How long calls still skip Redis after a timeout (the `cooldown`), in ms; 0 when they don't. */
  cooldownRemainingMs(): number {
    return Math.max(0, this.downUntil - this.clock.now());
  }

  /** Redis did not answer in time: skip it for the cool-down, and give up the calls waiting on it. */
  private stalled(): void {
    this.downUntil = this.clock.now() + this.cooldownMs;
    for (const abandon of [...this.inFlight])
      abandon('Redis stalled: a call before this one timed out');
  }

  private notify(key: string): void {
    const sub = this.subscriptions.get(key);
    if (sub) for (const wake of sub.wakes) wake();
  }

  private notifyAll(): void {
    for (const key of [...this.subscriptions.keys()]) this.notify(key);
  }
}

/** Runs a pipeline (one round trip) and returns its replies, or throws its first error. */
async function replies(pipeline: ChainableCommander): Promise<unknown[]> {
  const results = (await pipeline.exec()) ?? [];
  const failed = results.find(([err]) => err);
  if (failed) throw failed[0];
  return results.map(([, reply]) => reply);
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
