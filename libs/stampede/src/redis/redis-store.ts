import { registerScripts } from '@nest-redis-resilience/common';
import { Clock, systemClock } from '../core/clock';
import { defaultCodec, Envelope, EnvelopeCodec, sameEnvelope } from '../core/envelope';
import { StoreUnavailableError } from '../core/errors';
import { OperationGuard } from '../core/operation-guard';
import type {
  FillWatch,
  InvalidationMessage,
  InvalidationMode,
  ReadOrLockResult,
  StampedeStore,
  TagState,
} from '../core/store';
import { FillChannels } from './fill-channels';
import { mget } from './mget';
import { StampedeKeys } from './keys';
import { RedisBus } from './redis-bus';
import { RedisInvalidations, ScriptClient } from './redis-invalidations';
import {
  clientOf,
  PubSubVerbs,
  quit,
  RedisClient,
  RedisConnection,
  subscriberOf,
  toStoreError,
  whenReady,
} from './redis-connection';
import { DROP_VALUE, EXTEND_LOCK, READ_OR_WAIT, SCRIPTS, UNLOCK } from './scripts';
import { decodeStored, isValueLock, valueLockOf, WAITING } from './value-lock';

export type { RedisConnection } from './redis-connection';
export { isRedisClient } from './redis-connection';

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

/**
 * The distributed store: envelopes in Redis, locks by `SET NX PX` with a random token (a miss's
 * lock is a mark in the value key, see value-lock.ts; a refresh's, a key of its own), and fill
 * notifications on one channel per key, which only the instances waiting for that key subscribe
 * to (sharded pub/sub on a Cluster). A fill publishes only when the lock says someone waits.
 * Clients passed in by the app are used but not closed; clients it creates are closed by close().
 */
export class RedisStore implements StampedeStore {
  readonly name = 'redis';
  readonly distributed = true;
  readonly keys: StampedeKeys;
  readonly client: RedisClient;
  readonly codec: EnvelopeCodec;
  private readonly subscriber: RedisClient;
  private readonly pubsub: PubSubVerbs;
  private readonly ownsClient: boolean;
  private readonly guard: OperationGuard;
  private readonly channels: FillChannels;
  private readonly bus: RedisBus;
  private readonly invalidations: RedisInvalidations;
  private closed = false;
  private readonly now: () => number;

  constructor(connection: RedisConnection, options: RedisStoreOptions = {}) {
    const clock = options.clock ?? systemClock;
    this.now = () => clock.now();
    this.keys = new StampedeKeys(options.keyPrefix ?? 'stampede:');
    this.codec = options.codec ?? defaultCodec;
    this.guard = new OperationGuard({
      timeoutMs: options.operationTimeout ?? 500,
      cooldownMs: options.cooldown ?? 1000,
      clock,
      backend: 'Redis',
    });
    const { client, owned } = clientOf(connection);
    this.client = client;
    this.ownsClient = owned;
    registerScripts(client, SCRIPTS);
    ({ subscriber: this.subscriber, pubsub: this.pubsub } = subscriberOf(client));
    this.channels = new FillChannels(this.subscriber, this.pubsub, this.keys, clock, (p) =>
      this.guard.bound(p, 'SUBSCRIBE'),
    );
    // A lost subscription would strand waiters until their lock expires: wake them so they poll.
    this.bus = new RedisBus(this.subscriber, client, this.keys, clock, () =>
      this.channels.notifyAll(),
    );
    this.invalidations = new RedisInvalidations(
      client,
      this.keys,
      this.bus,
      this.codec,
      (op, late) => this.call(op, late),
    );
  }

  /** The hit path: one GET, and no allocation beyond the command and its reply's decoding. */
  get<T>(key: string): Promise<Envelope<T> | undefined> {
    const refused = this.refusal();
    if (refused) return Promise.reject(refused);
    const reply = this.client.get(this.keys.value(key));
    return this.guard
      .bound(reply, 'command', undefined, true, toStoreError)
      .then(this.decode) as Promise<Envelope<T> | undefined>;
  }

  getMany<T>(keys: string[]): Promise<(Envelope<T> | undefined)[]> {
    return this.call(() => mget<T>(this.client, keys.map(this.keys.value, this.keys), this.codec));
  }

  private readonly decode = (raw: string | null): Envelope | undefined =>
    decodeStored(this.codec, raw);

  async set(key: string, envelope: Envelope, ttlMs: number, raw?: string): Promise<void> {
    const text = raw ?? this.codec.encode(envelope);
    await this.call(() => this.client.set(this.keys.value(key), text, 'PX', ttlMs));
  }

  /** Deletes the value, leaving a miss's lock mark alone (see DROP_VALUE). */
  async delete(key: string): Promise<void> {
    await this.script(DROP_VALUE.name, this.keys.value(key));
  }

  tagVersions(tags: string[], floors: number[]): Promise<number[]> {
    return this.invalidations.tagVersions(tags, floors);
  }

  tagStates(tags: string[], floors: number[]): Promise<TagState[]> {
    return this.invalidations.tagStates(tags, floors);
  }

  bumpTags(tags: string[], floors: number[], mode?: InvalidationMode): Promise<number[]> {
    return this.invalidations.bumpTags(tags, floors, mode);
  }

  /** How long calls still skip Redis after a timeout (the `cooldown`), in ms; 0 when they don't. */
  cooldownRemainingMs(): number {
    return this.guard.cooldownRemainingMs();
  }

  /** Asks Redis itself, ignoring the cool-down, so a health check sees the truth. */
  async ping(): Promise<void> {
    await this.guard.bound(this.client.ping(), 'PING');
  }

  /**
   * A first attempt (right after a read that missed) is one `SET value <mark> NX PX`: a value
   * filled since that read makes it fail, and the caller reads the value on its waiting attempt.
   * A waiting attempt runs READ_OR_WAIT, which reads the value, takes the lock when the key is
   * empty, or marks the lock as waited for. The lock's token is then the mark.
   */
  async readOrLock<T>(
    key: string,
    token: string,
    lockTtlMs: number,
    waiting = false,
  ): Promise<ReadOrLockResult<T>> {
    const mark = valueLockOf(token);
    if (waiting) return this.readOrWait(key, mark, lockTtlMs);
    const set = await this.call(
      () => this.client.set(this.keys.value(key), mark, 'PX', lockTtlMs, 'NX'),
      (late) => {
        if (late === 'OK') this.releaseQuietly(key, mark);
      },
    );
    return set === 'OK' ? { kind: 'locked', token: mark } : { kind: 'busy', lockTtlMs: -1 };
  }

  async tryLock(
    key: string,
    token: string,
    lockTtlMs: number,
    current?: Envelope,
  ): Promise<boolean> {
    // SET NX of the lock and GET of the value in one round trip; a late lock is released.
    const [set, raw] = await this.call(
      () =>
        Promise.all([
          this.client.set(this.keys.lock(key), token, 'PX', lockTtlMs, 'NX'),
          this.client.get(this.keys.value(key)),
        ]),
      ([lateSet]) => {
        if (lateSet === 'OK') this.releaseQuietly(key, token);
      },
    );
    if (set !== 'OK') return false;
    const refreshed = current && !sameEnvelope(decodeStored(this.codec, raw), current);
    if (refreshed || isValueLock(raw)) {
      // Refreshed by someone else since the caller read it (this expiry is already dealt with),
      // or a miss is loading it.
      this.releaseQuietly(key, token);
      return false;
    }
    // A value that would expire before the refresh's lock is kept that long: callers that find
    // it expired then wait for this refresh (see READ_OR_WAIT) instead of loading it again. Only
    // the lock's holder does it, once it knows the value is the one it read: a newer value must
    // not be cut short.
    if (current && current.e + (current.g ?? 0) - this.now() < lockTtlMs) {
      this.client.pexpire(this.keys.value(key), lockTtlMs).catch(() => undefined);
    }
    return true;
  }

  async extendLock(key: string, token: string, lockTtlMs: number): Promise<boolean> {
    return (
      (await this.script(EXTEND_LOCK.name, this.lockHolder(key, token), token, lockTtlMs)) === 1
    );
  }

  async unlock(key: string, token: string): Promise<boolean> {
    return (await this.script(UNLOCK.name, ...this.unlockArgs(key, token))) === 1;
  }

  /**
   * With a miss's lock: one `SET value PX GET` over the lock mark, then a PUBLISH only if the
   * mark it replaced says someone waits (or the mark was replaced meanwhile, by a `set` or a
   * later holder). With a refresh's lock: the SET and a GETDEL of the lock key in one round
   * trip, then a PUBLISH only if the lock says someone waits. The lock is released whoever holds
   * it: a late holder's fill stores a fresh value, so callers are served and no lock is left
   * waiting for a fill.
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
    let waited: boolean;
    if (isValueLock(token)) {
      const replaced = await this.call(() =>
        this.client.set(this.keys.value(key), text, 'PX', ttlMs, 'GET'),
      );
      waited =
        replaced !== null &&
        replaced !== token &&
        (!isValueLock(replaced) || replaced.endsWith(WAITING));
    } else {
      // Two commands written together: one round trip, without a pipeline's objects.
      const [, holder] = await this.call(() =>
        Promise.all([
          this.client.set(this.keys.value(key), text, 'PX', ttlMs),
          this.client.getdel(this.keys.lock(key)),
        ]),
      );
      waited = typeof holder === 'string' && holder.endsWith(WAITING);
    }
    if (waited) {
      await this.call(() => this.client[this.pubsub.publish](this.keys.channel(key), key));
    }
  }

  watch(key: string): FillWatch {
    return this.channels.watch(key);
  }

  notificationsLive(): boolean {
    return this.subscriber.status === 'ready';
  }

  /** Fill notifications this store has received: about one per wait of this process, whatever the other instances fill. */
  get notificationsReceived(): number {
    return this.channels.notificationsReceived;
  }

  broadcast(message: InvalidationMessage): Promise<void> {
    return this.call(() => this.client.publish(this.keys.bus, this.bus.text(message))).then(
      () => undefined,
    );
  }

  /** DEL and PUBLISH in one script (see RedisInvalidations). */
  invalidate(key: string): Promise<void> {
    return this.invalidations.invalidate(key);
  }

  /** A tag's new version and its PUBLISH in one script per tag (see RedisInvalidations). */
  invalidateTags(tags: string[], floors: number[], mode?: InvalidationMode): Promise<number[]> {
    return this.invalidations.invalidateTags(tags, floors, mode);
  }

  /** SET and PUBLISH in one script (see RedisInvalidations). */
  replace(key: string, envelope: Envelope, ttlMs: number, raw?: string): Promise<void> {
    return this.invalidations.replace(key, envelope, ttlMs, raw);
  }

  /** A soft expiry written only over the value read, with its PUBLISH (see RedisInvalidations). */
  expire(key: string, at: number): Promise<void> {
    return this.invalidations.expire(key, at);
  }

  onInvalidation(
    listener: (message: InvalidationMessage) => void,
    reset: () => void,
    busChanged?: (downSince: number | undefined) => void,
  ): void {
    this.bus.listen({ listener, reset, busChanged });
  }

  invalidationsDownSince(): number | undefined {
    return this.bus.downSinceTime;
  }

  /** Resolves once both connections are ready, or after `timeoutMs` (then calls fall back to the loader until Redis answers). */
  waitUntilReady(timeoutMs = 2000): Promise<boolean> {
    return whenReady([this.client, this.subscriber], this.bus.subscribed, timeoutMs);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.bus.close();
    this.channels.close();
    await quit(this.subscriber);
    if (this.ownsClient) await quit(this.client);
  }

  private async readOrWait<T>(
    key: string,
    mark: string,
    lockTtlMs: number,
  ): Promise<ReadOrLockResult<T>> {
    const reply = (await this.call(
      () =>
        (this.client as ScriptClient)[READ_OR_WAIT.name](
          this.keys.value(key),
          this.keys.lock(key),
          mark,
          lockTtlMs,
        ),
      (late) => {
        if ((late as [number])[0] === 2) this.releaseQuietly(key, mark);
      },
    )) as [number, (string | number)?, number?];
    if (reply[0] === 1) {
      const envelope = this.codec.decode<T>(reply[1] as string);
      if (envelope && reply[2] !== undefined)
        return { kind: 'hit', envelope, refreshTtlMs: Number(reply[2]) };
      if (envelope) return { kind: 'hit', envelope };
      // A corrupt value: drop it and compete for the lock as on a miss.
      await this.delete(key);
      return this.readOrWait(key, mark, lockTtlMs);
    }
    if (reply[0] === 2) return { kind: 'locked', token: mark };
    return { kind: 'busy', lockTtlMs: Number(reply[1]) };
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

  private unlockArgs(key: string, token: string): string[] {
    return [this.lockHolder(key, token), token, this.pubsub.publish, this.keys.channel(key), key];
  }

  /** The key a lock lives in: the value key for a miss's mark, the lock key for a refresh's token. */
  private lockHolder(key: string, token: string): string {
    return isValueLock(token) ? this.keys.value(key) : this.keys.lock(key);
  }

  private script(name: string, ...args: (string | number)[]): Promise<unknown> {
    return this.call(() => (this.client as ScriptClient)[name](...args));
  }

  /**
   * Fails fast while Redis is known down, bounds every call by the operation timeout (see
   * OperationGuard). `onAbandoned` gets the reply of a command that answered after its timeout.
   */
  private call<T>(op: () => Promise<T>, onAbandoned?: (late: T) => void): Promise<T> {
    const refused = this.refusal();
    if (refused) return Promise.reject(refused);
    return this.guard.bound(op(), 'command', onAbandoned, true, toStoreError);
  }

  /** Why a command must not be sent now, or undefined. */
  private refusal(): StoreUnavailableError | undefined {
    if (this.closed) return new StoreUnavailableError('the Redis store is closed');
    if (this.client.status !== 'ready') {
      return new StoreUnavailableError(`Redis connection is ${this.client.status}`);
    }
    return this.guard.refusal();
  }
}
