import type { Clock } from '../core/clock';
import type { FillWatch } from '../core/store';
import type { StampedeKeys } from './keys';
import type { PubSubVerbs, RedisClient } from './redis-connection';

/** The waiters of one process for one key, and that key's channel subscription. */
interface Subscription {
  wakes: Set<() => void>;
  /** True once subscribed; false if the subscription could not be made in time. */
  ready: Promise<boolean>;
  dropTimer?: unknown;
}

/**
 * Fill notifications: one channel per key, which only the instances waiting for that key
 * subscribe to (sharded pub/sub on a Cluster), shared by the waiters of this process.
 */
export class FillChannels {
  private readonly subscriptions = new Map<string, Subscription>();
  private received = 0;
  private closed = false;

  constructor(
    private readonly subscriber: RedisClient,
    private readonly pubsub: PubSubVerbs,
    private readonly keys: StampedeKeys,
    private readonly clock: Clock,
    /** Bounds the SUBSCRIBE of a key (the operation timeout). */
    private readonly bound: (subscribed: Promise<unknown>) => Promise<unknown>,
  ) {
    subscriber.on(pubsub.message, (channel: string) => {
      const key = keys.keyOfChannel(channel);
      if (key === undefined) return;
      this.received++;
      this.notify(key);
    });
  }

  /** Fill notifications received: about one per wait of this process. */
  get notificationsReceived(): number {
    return this.received;
  }

  watch(key: string): FillWatch {
    let sub = this.subscriptions.get(key);
    if (!sub) {
      sub = { wakes: new Set(), ready: this.subscribe(key) };
      this.subscriptions.set(key, sub);
    } else if (sub.dropTimer !== undefined) {
      this.clock.clearTimer(sub.dropTimer);
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
        if (owner.wakes.size === 0 && owner.dropTimer === undefined) {
          // Unsubscribe a moment later: a waiter that goes on waiting re-watches at once.
          owner.dropTimer = this.clock.setTimer(() => this.drop(key, owner), 0);
        }
      },
    };
  }

  /** Wakes every waiter (the subscription was lost: they poll from now on). */
  notifyAll(): void {
    for (const key of [...this.subscriptions.keys()]) this.notify(key);
  }

  close(): void {
    this.closed = true;
    this.notifyAll();
    for (const sub of this.subscriptions.values())
      if (sub.dropTimer !== undefined) this.clock.clearTimer(sub.dropTimer);
    this.subscriptions.clear();
  }

  private async subscribe(key: string): Promise<boolean> {
    if (this.closed || this.subscriber.status !== 'ready') return false;
    try {
      await this.bound(this.subscriber[this.pubsub.subscribe](this.keys.channel(key)));
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

  private notify(key: string): void {
    const sub = this.subscriptions.get(key);
    if (sub) for (const wake of sub.wakes) wake();
  }
}
