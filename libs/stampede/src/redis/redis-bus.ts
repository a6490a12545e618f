import { randomUUID } from 'node:crypto';
import type { Clock } from '../core/clock';
import type { InvalidationMessage } from '../core/store';
import type { StampedeKeys } from './keys';
import type { RedisClient } from './redis-connection';

interface Listener {
  listener: (message: InvalidationMessage) => void;
  reset: () => void;
  busChanged?: (downSince: number | undefined) => void;
}

/**
 * The receiving side of the invalidation bus: one channel every instance subscribes to. Messages
 * carry the sender's id, so an instance skips its own (it applied them when it sent them). While
 * the subscriber is away, messages are lost: the listeners hear when the bus goes down, and are
 * reset when it is back.
 */
export class RedisBus {
  private readonly listeners: Listener[] = [];
  private readonly instanceId = randomUUID();
  /** Since when the bus is not subscribed (from the start until the first subscription). */
  private downSince: number | undefined;
  private closed = false;
  /** Resolves once the bus is first subscribed. */
  readonly subscribed: Promise<void>;

  constructor(
    private readonly subscriber: RedisClient,
    client: RedisClient,
    private readonly keys: StampedeKeys,
    private readonly clock: Clock,
    /** Called when the subscriber connection closes (waiters for fills must poll). */
    onLost: () => void,
  ) {
    this.downSince = clock.now();
    subscriber.on('message', (channel: string, text: string) => {
      if (channel === keys.bus) this.receive(text);
    });
    subscriber.on('close', () => {
      onLost();
      this.down();
    });
    // The bus is up once its SUBSCRIBE answers: after ioredis' own resubscription, which it
    // sends first on a reconnect (this one also covers a first SUBSCRIBE that failed).
    // Invalidations sent while the subscriber was away are lost: the listeners start afresh.
    let connectedBefore = false;
    let subscribed!: () => void;
    this.subscribed = new Promise((resolve) => (subscribed = resolve));
    subscriber.on('ready', () => {
      subscriber.subscribe(keys.bus).then(
        () => {
          if (this.closed || subscriber.status !== 'ready') return;
          if (connectedBefore) for (const l of this.listeners) l.reset();
          connectedBefore = true;
          this.up();
          subscribed();
        },
        () => undefined,
      );
    });
    // The command connection back after a loss may find a Redis that lost its data (a restart
    // without persistence) while the subscriber is still away: the listeners start afresh now
    // too, so that values loaded meanwhile are stamped with the tag versions Redis has.
    let clientConnectedBefore = client.status === 'ready';
    client.on('ready', () => {
      if (clientConnectedBefore && !this.closed) for (const l of this.listeners) l.reset();
      clientConnectedBefore = true;
    });
    // Also connects a subscriber made with lazyConnect (a duplicate of such a client).
    subscriber.subscribe(keys.bus).catch(() => undefined);
  }

  listen(listener: Listener): void {
    this.listeners.push(listener);
  }

  get downSinceTime(): number | undefined {
    return this.downSince;
  }

  /** The text of `message` as sent by this instance. */
  text(message: InvalidationMessage): string {
    return JSON.stringify({ ...message, from: this.instanceId });
  }

  /**
   * The text of `{ tags: { [tag]: version } }` (or `soft`) before the version (a script writes
   * the rest).
   */
  tagTextBefore(tag: string, field: 'tags' | 'soft' = 'tags'): string {
    return `{"from":${JSON.stringify(this.instanceId)},"${field}":{${JSON.stringify(tag)}:`;
  }

  /** Hands `message` to this process's listeners. */
  deliver(message: InvalidationMessage): void {
    for (const l of this.listeners) l.listener(message);
  }

  close(): void {
    this.closed = true;
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

  private down(): void {
    if (this.closed || this.downSince !== undefined) return;
    const since = this.clock.now();
    this.downSince = since;
    for (const l of this.listeners) l.busChanged?.(since);
  }

  private up(): void {
    if (this.downSince === undefined) return;
    this.downSince = undefined;
    for (const l of this.listeners) l.busChanged?.(undefined);
  }
}
