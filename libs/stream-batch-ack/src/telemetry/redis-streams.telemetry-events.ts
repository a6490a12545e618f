import type { DeadLetterCause } from '../dead-letter/dead-letter-entry';

/** An entry was moved to its dead-letter stream. */
export interface DeadLetteredEvent {
  stream: string;
  group: string;
  /** The entry id in the stream. */
  id: string;
  /** Deliveries of the entry before it was dead-lettered. */
  deliveries: number;
  reason: DeadLetterCause;
  /** What was thrown (the original error), or why the entry could not run. */
  error: unknown;
}

/** An XACK failed; its ids stay queued and the flush is retried with backoff. */
export interface AckFlushFailedEvent {
  stream: string;
  group: string;
  /** Ids in the failed XACK. */
  count: number;
  /** Consecutive failed flushes of this stream, this one included (1 = first). */
  attempt: number;
  error: unknown;
}

/** An XACK succeeded after failed ones. */
export interface AckFlushRecoveredEvent {
  stream: string;
  group: string;
  /** Ids in the XACK that succeeded. */
  count: number;
  /** Failed flushes before it. */
  failedAttempts: number;
}

/** The claim loop took over entries of other (dead or stalled) consumers. */
export interface ClaimEvent {
  stream: string;
  group: string;
  /** The consumer that took them (this server's). */
  consumer: string;
  count: number;
  /** The consumers they were taken from. */
  from: string[];
}

/**
 * The consumer group was missing on a stream (`XGROUP DESTROY`, or the stream was deleted) and
 * this server created it again, after the last entry it had read: nothing it read is delivered
 * again, everything written since is.
 */
export interface GroupRecreatedEvent {
  stream: string;
  group: string;
  /** The consumer that recreated it (this server's). */
  consumer: string;
  /** The id the group was created at: entries after it are delivered. */
  fromId: string;
  /**
   * True when this server knew no entry of the stream (it had read none, and the group had
   * delivered none when the server started): `fromId` is then the `startId` option.
   */
  fromStartId: boolean;
}

/** A partition of an ordered partitioned stream, as the partition events name it. */
export interface PartitionEventBase {
  /** The logical stream (the handler's pattern). */
  stream: string;
  partition: number;
  /** The partition's stream, e.g. `ticks:{2}`. */
  partitionStream: string;
  group: string;
  /** This server's consumer. */
  consumer: string;
}

/** This consumer took a partition's lease, and the previous owner's pending entries. */
export interface PartitionAssignedEvent extends PartitionEventBase {
  /** The lease's fencing token (grows with every new lease of the partition). */
  token: string;
  /** Pending entries taken over from the previous owner (handled first, in id order). */
  takenOver: number;
}

/** This consumer gave a partition up, after its handlers finished and its acks were sent. */
export interface PartitionReleasedEvent extends PartitionEventBase {
  /** `'rebalance'`: the group changed and another consumer gets it; `'shutdown'`: close(). */
  reason: 'rebalance' | 'shutdown';
}

/** This consumer lost a partition's lease without handing it over (it was not renewed in time). */
export interface PartitionLostEvent extends PartitionEventBase {
  reason: string;
}

/** The events of `server.events`, by name. */
export interface RedisStreamsTelemetryEvents {
  'redis_streams.message.dead_lettered': DeadLetteredEvent;
  'redis_streams.ack.flush_failed': AckFlushFailedEvent;
  'redis_streams.ack.flush_recovered': AckFlushRecoveredEvent;
  'redis_streams.claim': ClaimEvent;
  'redis_streams.group.recreated': GroupRecreatedEvent;
  'redis_streams.partition.assigned': PartitionAssignedEvent;
  'redis_streams.partition.released': PartitionReleasedEvent;
  'redis_streams.partition.lost': PartitionLostEvent;
}

export type RedisStreamsTelemetryEventName = keyof RedisStreamsTelemetryEvents;

/** The part of `EventEmitter2` (`@nestjs/event-emitter`) that events are forwarded to. */
export interface EventEmitterLike {
  emit(event: string, ...values: unknown[]): boolean;
}

type Listener<K extends RedisStreamsTelemetryEventName> = (
  payload: RedisStreamsTelemetryEvents[K],
) => void;

/**
 * The events of one ServerRedisStreams (`server.events`): typed listeners, and forwarding to an
 * EventEmitter2 (`@OnEvent('redis_streams.message.dead_lettered')` handlers). A listener that
 * throws is logged and does not stop the others or the transport.
 */
export class RedisStreamsEventBus {
  private readonly listeners = new Map<string, Set<(payload: never) => void>>();
  private emitter: EventEmitterLike | null;

  constructor(
    emitter: EventEmitterLike | undefined,
    private readonly onListenerError: (event: string, err: unknown) => void,
  ) {
    this.emitter = emitter ?? null;
  }

  /** Calls `listener` on every `event`; returns a function that removes it. */
  on<K extends RedisStreamsTelemetryEventName>(event: K, listener: Listener<K>): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener);
    return () => this.off(event, listener);
  }

  off<K extends RedisStreamsTelemetryEventName>(event: K, listener: Listener<K>): void {
    this.listeners.get(event)?.delete(listener);
  }

  /**
   * Also emits every event on `emitter` (the app's EventEmitter2: `app.get(EventEmitter2)`), or
   * stops forwarding with null. Same as the server option `eventEmitter`.
   */
  forwardTo(emitter: EventEmitterLike | null): void {
    this.emitter = emitter;
  }

  /** True when someone listens to `event` (the payload is only built then). */
  wants(event: RedisStreamsTelemetryEventName): boolean {
    return this.emitter !== null || (this.listeners.get(event)?.size ?? 0) > 0;
  }

  emit<K extends RedisStreamsTelemetryEventName>(
    event: K,
    payload: RedisStreamsTelemetryEvents[K],
  ): void {
    const set = this.listeners.get(event);
    if (set)
      for (const listener of [...set]) {
        try {
          (listener as Listener<K>)(payload);
        } catch (err) {
          this.onListenerError(event, err);
        }
      }
    if (this.emitter) {
      try {
        this.emitter.emit(event, payload);
      } catch (err) {
        this.onListenerError(event, err);
      }
    }
  }
}
