import { Logger } from '@nestjs/common';
import { CustomTransportStrategy, Server } from '@nestjs/microservices';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { hostname } from 'node:os';
import { isObservable, lastValueFrom } from 'rxjs';
import { AckBatcher } from '../core/ack-batcher';
import { backoffDelay } from '../core/backoff';
import { decodeEntry } from '../core/entry-codec';
import {
  describeError,
  MalformedEntryError,
  MaxDeliveriesExceededError,
  NotInitializedError,
} from '../core/errors';
import { LruCache } from '../core/lru-cache';
import {
  closeClient,
  createClusterClient,
  createRedisClient,
  isClusterConnection,
} from '../redis/connection';
import { defaultDeadLetterStream, groupStreamsForReading, keySlot } from '../redis/keys';
import { defineStreamScripts, StreamScripts } from '../redis/scripts';
import { RedisStreamsContext } from './redis-streams.context';
import {
  RedisStreamsConnectionType,
  RedisStreamsEvents,
  RedisStreamsEventsMap,
  RedisStreamsStatus,
} from './redis-streams.events';
import { RedisStreamsServerOptions, ResolvedServerOptions } from './redis-streams.options';

type Entry = [id: string, fields: string[] | null];
/** The transport id of ServerRedisStreams (for `onProcessingStartHook` and friends). */
export const REDIS_STREAMS_TRANSPORT = Symbol('REDIS_STREAMS');

type Client = Redis | Cluster;
type CommandClient = Client & StreamScripts;

export function resolveServerOptions(options: RedisStreamsServerOptions): ResolvedServerOptions {
  return {
    connection: options.connection,
    group: options.group,
    consumer: options.consumer ?? `${hostname()}-${process.pid}`,
    startId: options.startId ?? '0',
    read: { count: options.read?.count ?? 500, blockMs: options.read?.blockMs ?? 100 },
    ack: {
      batchSize: options.ack?.batchSize ?? 500,
      intervalMs: options.ack?.intervalMs ?? 50,
      maxPending: options.ack?.maxPending ?? 50_000,
      backoff: options.ack?.backoff,
    },
    claim: {
      minIdleMs: options.claim?.minIdleMs ?? 30_000,
      intervalMs: options.claim?.intervalMs ?? 5_000,
      count: options.claim?.count ?? 100,
    },
    deadLetter: {
      maxDeliveries: Math.max(1, options.deadLetter?.maxDeliveries ?? 5),
      stream: options.deadLetter?.stream ?? defaultDeadLetterStream,
      maxLen: options.deadLetter?.maxLen ?? 0,
    },
    concurrency: Math.max(1, options.concurrency ?? 1000),
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? 10_000,
  };
}

/**
 * A Nest microservice transport over Redis Streams consumer groups. Every `@EventPattern(stream)`
 * handler consumes one stream; entries are acknowledged in batches after their handler succeeded.
 */
export class ServerRedisStreams
  extends Server<RedisStreamsEvents, RedisStreamsStatus>
  implements CustomTransportStrategy
{
  protected override readonly logger = new Logger(ServerRedisStreams.name);
  readonly options: ResolvedServerOptions;

  /** The first blocking reader (the only one on a single Redis). */
  protected reader: Client | null = null;
  /** One blocking reader per group of streams that one XREADGROUP call can read. */
  protected readers: Client[] = [];
  private readGroups: string[][] = [];
  protected commands: CommandClient | null = null;
  protected batcher: AckBatcher | null = null;
  protected isManuallyClosed = false;
  protected closing = false;
  private closePromise: Promise<void> | null = null;
  private pendingEventListeners: {
    event: keyof RedisStreamsEvents;
    callback: (...args: any[]) => void;
  }[] = [];
  private streams: string[] = [];
  private readLoops: Promise<void>[] = [];
  private claimLoop: Promise<void> | null = null;
  private readonly inFlight = new Set<string>();
  private readonly running = new Set<Promise<void>>();
  private readonly wakers = new Set<() => void>();
  /** Sleepers that only close() interrupts (the claim loop's interval). */
  private readonly closeWakers = new Set<() => void>();
  private readonly lastErrors = new LruCache<string>({ maxSize: 10_000, ttlMs: 24 * 3600_000 });
  private readonly claimCursors = new Map<string, string>();

  constructor(options: RedisStreamsServerOptions) {
    super();
    this.transportId = REDIS_STREAMS_TRANSPORT;
    this.options = resolveServerOptions(options);
    this.initializeSerializer(options as any);
    this.initializeDeserializer(options as any);
  }

  listen(callback: (...optionalParams: unknown[]) => any): void {
    void this.start().then(
      () => callback(),
      (err) => callback(err),
    );
  }

  protected async start(): Promise<void> {
    this.streams = [...this.messageHandlers.keys()];
    const cluster = isClusterConnection(this.options.connection);
    if (cluster) this.checkClusterSlots();
    this.readGroups = groupStreamsForReading(this.streams, cluster);
    const readerCount = Math.max(1, this.readGroups.length);
    this.readers = Array.from({ length: readerCount }, () =>
      this.createClient('reader', { maxRetriesPerRequest: null }),
    );
    this.reader = this.readers[0];
    this.commands = defineStreamScripts(this.createClient('command', {}));
    this.pendingEventListeners = [];
    await Promise.all([...this.readers.map((r) => r.connect()), this.commands.connect()]);
    await this.ensureGroups();
    this.batcher = new AckBatcher(
      (stream, ids) => this.unwrapCommands().xack(stream, this.options.group, ...ids),
      {
        batchSize: this.options.ack.batchSize,
        intervalMs: this.options.ack.intervalMs,
        backoff: this.options.ack.backoff,
        onError: (err) => this.logger.warn(err.message),
      },
    );
    this.batcher.onChange(() => this.wake());
    if (this.streams.length === 0) {
      this.logger.warn('No @EventPattern handlers registered: nothing to read.');
      return;
    }
    this.readLoops = this.readGroups.map((streams, i) =>
      this.runReadLoop(this.readers[i], streams),
    );
    this.claimLoop = this.runClaimLoop();
  }

  /** The streams each blocking reader reads with one XREADGROUP call (one group on a single Redis). */
  get readerStreams(): string[][] {
    return this.readGroups.map((g) => [...g]);
  }

  /** On a Cluster, the dead-letter script touches a stream and its dead-letter stream: one slot. */
  private checkClusterSlots(): void {
    for (const stream of this.streams) {
      const dlq = this.options.deadLetter.stream(stream);
      if (keySlot(dlq) !== keySlot(stream))
        throw new Error(
          `Redis Cluster: stream "${stream}" and its dead-letter stream "${dlq}" are in different hash slots. ` +
            `Give the stream a hash tag (e.g. "{${stream}}", whose default dead-letter stream is "{${stream}}:dlq"), ` +
            `or a deadLetter.stream function that keeps the tag.`,
        );
    }
  }

  /** The entries handled right now. */
  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Ids processed and waiting for their batched XACK. */
  get pendingAcks(): number {
    return this.batcher?.size ?? 0;
  }

  /** Acknowledge every queued id now (normally done by size/interval). */
  async flushAcks(): Promise<void> {
    await this.batcher?.flush();
  }

  async close(): Promise<void> {
    if (!this.closePromise) this.closePromise = this.doClose();
    return this.closePromise;
  }

  private async doClose(): Promise<void> {
    this.isManuallyClosed = true;
    this.closing = true;
    this.wake();
    for (const w of [...this.closeWakers]) w();
    // 1. Stop reading: disconnecting the blocking connection breaks out of BLOCK.
    for (const reader of this.readers) reader.disconnect();
    await Promise.allSettled([...this.readLoops, this.claimLoop]);
    // 2. Let running handlers finish, within the bound.
    const deadline = Date.now() + this.options.shutdownTimeoutMs;
    if (this.running.size > 0) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.allSettled([...this.running]),
        new Promise<void>(
          (resolve) => (timer = setTimeout(resolve, this.options.shutdownTimeoutMs)),
        ),
      ]);
      clearTimeout(timer);
      if (this.running.size > 0) {
        this.logger.warn(
          `${this.running.size} handler(s) still running after ${this.options.shutdownTimeoutMs} ms; their entries stay pending and will be delivered again.`,
        );
      }
    }
    // 3. Flush every queued ack.
    if (this.batcher) {
      const left = await this.batcher.close(Math.max(1000, deadline - Date.now()));
      if (left > 0)
        this.logger.error(
          `${left} ack(s) could not be sent before shutdown; those entries stay pending and will be delivered again.`,
        );
    }
    // 4. Close the connections.
    await closeClient(this.commands);
    this.pendingEventListeners = [];
  }

  on<
    EventKey extends keyof RedisStreamsEvents = keyof RedisStreamsEvents,
    EventCallback extends RedisStreamsEvents[EventKey] = RedisStreamsEvents[EventKey],
  >(event: EventKey, callback: EventCallback): void {
    if (this.reader && this.commands) {
      for (const reader of this.readers)
        reader.on(event, (...args: unknown[]) => (callback as any)('reader', ...args));
      this.commands.on(event, (...args: unknown[]) => (callback as any)('command', ...args));
    } else {
      this.pendingEventListeners.push({ event, callback: callback as any });
    }
  }

  /**
   * `[reader, commands]`: the blocking connection and the command connection (ioredis `Redis`, or
   * `Cluster` clients; with several readers on a Cluster, the first one; see `readerStreams`).
   */
  unwrap<T>(): T {
    if (!this.reader || !this.commands) throw new NotInitializedError('ServerRedisStreams');
    return [this.reader, this.commands] as T;
  }

  protected unwrapCommands(): CommandClient {
    if (!this.commands) throw new NotInitializedError('ServerRedisStreams');
    return this.commands;
  }

  protected createClient(type: RedisStreamsConnectionType, overrides: RedisOptions): Client {
    const { connection } = this.options;
    const userRetry = isClusterConnection(connection)
      ? connection.clusterOptions?.clusterRetryStrategy
      : typeof connection === 'object'
        ? connection.retryStrategy
        : undefined;
    const options: RedisOptions = {
      ...overrides,
      lazyConnect: true,
      retryStrategy: (times: number) => {
        if (this.isManuallyClosed) return null;
        return userRetry ? userRetry(times) : Math.min(times * 50, 2000);
      },
    };
    const client: Client = isClusterConnection(connection)
      ? createClusterClient(connection, options)
      : createRedisClient(connection, options);
    client.on(RedisStreamsEventsMap.ERROR, (err: Error) => {
      if (!this.isManuallyClosed) this.logger.error(`Redis ${type} connection: ${err.message}`);
    });
    client.on(RedisStreamsEventsMap.RECONNECTING, () => {
      if (!this.isManuallyClosed) this._status$.next(RedisStreamsStatus.RECONNECTING);
    });
    client.on(RedisStreamsEventsMap.READY, () => {
      if (this.readers.every((r) => r.status === 'ready') && this.commands?.status === 'ready')
        this._status$.next(RedisStreamsStatus.CONNECTED);
    });
    client.on(RedisStreamsEventsMap.END, () => {
      this._status$.next(RedisStreamsStatus.DISCONNECTED);
    });
    for (const { event, callback } of this.pendingEventListeners)
      client.on(event, (...args: unknown[]) => callback(type, ...args));
    return client;
  }

  protected async ensureGroups(): Promise<void> {
    const commands = this.unwrapCommands();
    for (const stream of this.streams) {
      try {
        await commands.call(
          'XGROUP',
          'CREATE',
          stream,
          this.options.group,
          this.options.startId,
          'MKSTREAM',
        );
      } catch (err) {
        if (!describeError(err).startsWith('BUSYGROUP')) throw err;
      }
    }
  }

  // ---------------------------------------------------------------- flow control

  private wake(): void {
    const wakers = [...this.wakers];
    this.wakers.clear();
    for (const w of wakers) w();
  }

  /**
   * Resolves after `ms`, or earlier on close(); with `onProgress` also on the next wake()
   * (a handler finished or acks were sent: the read loop waits for room that way).
   */
  private pause(ms: number, onProgress = true): Promise<void> {
    return new Promise<void>((resolve) => {
      const wakers = onProgress ? this.wakers : this.closeWakers;
      const timer = setTimeout(done, ms);
      const waker = (): void => done();
      function done(): void {
        clearTimeout(timer);
        wakers.delete(waker);
        resolve();
      }
      wakers.add(waker);
    });
  }

  /**
   * How many more entries may be taken now: free handler slots (`concurrency`), and room under
   * `ack.maxPending` for entries not yet acknowledged, counting both the ids waiting for their
   * XACK and the entries whose handler runs (each of those becomes a queued id when it succeeds).
   */
  private capacity(): number {
    const unacked = (this.batcher?.size ?? 0) + this.inFlight.size;
    return Math.max(
      0,
      Math.min(
        this.options.concurrency - this.inFlight.size,
        this.options.ack.maxPending - unacked,
      ),
    );
  }

  // ---------------------------------------------------------------- reading

  private async runReadLoop(reader: Client, streams: string[]): Promise<void> {
    let failures = 0;
    while (!this.closing) {
      const room = this.capacity();
      if (room === 0) {
        await this.pause(100);
        continue;
      }
      let reply: [string, Entry[]][] | null;
      try {
        reply = (await reader.call(
          'XREADGROUP',
          'GROUP',
          this.options.group,
          this.options.consumer,
          'COUNT',
          Math.min(this.options.read.count, room),
          'BLOCK',
          this.options.read.blockMs,
          'STREAMS',
          ...streams,
          ...streams.map(() => '>'),
        )) as [string, Entry[]][] | null;
        failures = 0;
      } catch (err) {
        if (this.closing) break;
        failures++;
        const message = describeError(err);
        if (message.startsWith('NOGROUP')) {
          this.logger.warn(
            `Consumer group "${this.options.group}" is missing (stream deleted?): creating it again.`,
          );
          await this.ensureGroups().catch((e) => this.logger.error(describeError(e)));
        } else {
          this.logger.error(`XREADGROUP failed: ${message}`);
        }
        await this.pause(backoffDelay(failures, { initialMs: 100, maxMs: 5000 }), false);
        continue;
      }
      if (!reply) continue;
      for (const [stream, entries] of reply) {
        for (const [id, fields] of entries) this.dispatch(stream, id, fields, 1);
      }
    }
  }

  // ---------------------------------------------------------------- recovery

  private async runClaimLoop(): Promise<void> {
    while (!this.closing) {
      await this.pause(this.options.claim.intervalMs, false);
      if (this.closing) break;
      for (const stream of this.streams) {
        if (this.closing) break;
        try {
          await this.claimOnce(stream);
        } catch (err) {
          if (!this.closing)
            this.logger.error(`XAUTOCLAIM on "${stream}" failed: ${describeError(err)}`);
        }
      }
    }
  }

  /** One XAUTOCLAIM round on `stream`: takes entries idle longer than minIdleMs and handles them. */
  async claimOnce(stream: string): Promise<number> {
    const room = this.capacity();
    if (room === 0) return 0;
    const commands = this.unwrapCommands();
    const { group, consumer } = this.options;
    const cursor = this.claimCursors.get(stream) ?? '0-0';
    const reply = (await commands.call(
      'XAUTOCLAIM',
      stream,
      group,
      consumer,
      this.options.claim.minIdleMs,
      cursor,
      'COUNT',
      Math.min(this.options.claim.count, room),
    )) as [string, Entry[], string[]?];
    const [next, entries] = reply;
    this.claimCursors.set(stream, next);
    const live = entries.filter(
      ([id, fields]) =>
        fields !== null &&
        !this.inFlight.has(`${stream}\u0000${id}`) &&
        !this.batcher?.has(stream, id),
    );
    // Entries deleted from the stream while pending (Redis < 7 returns them with nil fields): acknowledge them.
    for (const [id, fields] of entries) if (fields === null) this.batcher?.add(stream, id);
    if (live.length === 0) return 0;
    const pipeline = commands.pipeline();
    for (const [id] of live) pipeline.call('XPENDING', stream, group, id, id, 1);
    const counts = (await pipeline.exec()) ?? [];
    live.forEach(([id, fields], i) => {
      const [err, rows] = counts[i] ?? [];
      const row =
        !err && Array.isArray(rows) && rows.length > 0
          ? (rows[0] as [string, string, number, number])
          : undefined;
      if (!row) return; // acknowledged in the meantime
      this.dispatch(stream, id, fields, Number(row[3]));
    });
    return live.length;
  }

  // ---------------------------------------------------------------- handling

  private dispatch(stream: string, id: string, fields: string[] | null, deliveries: number): void {
    const key = `${stream}\u0000${id}`;
    if (this.inFlight.has(key)) return;
    this.inFlight.add(key);
    const done = (): void => {
      this.inFlight.delete(key);
      this.running.delete(run);
      if (this.wakers.size > 0) this.wake();
    };
    const run: Promise<void> = this.handleEntry(stream, id, fields, deliveries).then(
      done,
      (err: unknown) => {
        this.logger.error(`Entry ${id} of "${stream}": ${describeError(err)}`);
        done();
      },
    );
    this.running.add(run);
  }

  protected async handleEntry(
    stream: string,
    id: string,
    flat: string[] | null,
    deliveries: number,
  ): Promise<void> {
    const decoded = decodeEntry(flat);
    const { maxDeliveries } = this.options.deadLetter;
    if (!decoded.ok) {
      const error = new MalformedEntryError(stream, id, decoded.error);
      this.logger.warn(error.message);
      await this.deadLetter(stream, id, decoded.fields, deliveries, 'malformed', error);
      return;
    }
    if (deliveries > maxDeliveries) {
      const error = new MaxDeliveriesExceededError(
        stream,
        id,
        deliveries - 1,
        this.lastErrors.get(`${stream}\u0000${id}`),
      );
      this.logger.warn(error.message);
      await this.deadLetter(stream, id, decoded.fields, deliveries - 1, 'max-deliveries', error);
      return;
    }
    // The patterns are the stream keys themselves: a direct lookup (Nest's getHandlerByPattern
    // first tries JSON.parse on the pattern, and the exception it throws per message costs more
    // than the rest of the handling).
    const handler = this.messageHandlers.get(stream) ?? this.getHandlerByPattern(stream);
    if (!handler) {
      this.logger.error(`No handler for stream "${stream}"; entry ${id} stays pending.`);
      return;
    }
    const ctx = new RedisStreamsContext([
      stream,
      id,
      this.options.group,
      deliveries,
      this.options.consumer,
      decoded.fields,
    ]);
    try {
      await this.onProcessingStartHook(this.transportId!, ctx, async () => {
        const result: unknown = await handler(decoded.payload, ctx);
        // An Observable (interceptors, or a handler that returns one) completes before the ack;
        // a plain value needs no round through rxjs.
        if (isObservable(result)) await lastValueFrom(result, { defaultValue: undefined });
      });
    } catch (err) {
      const error = ctx.hasError() ? ctx.getError() : err;
      this.onProcessingEndHook?.(this.transportId!, ctx);
      const message = describeError(error);
      this.lastErrors.set(`${stream}\u0000${id}`, message);
      if (deliveries >= maxDeliveries) {
        this.logger.warn(
          `Entry ${id} of "${stream}" failed on delivery ${deliveries}/${maxDeliveries} (${message}): moving it to the dead-letter stream.`,
        );
        await this.deadLetter(stream, id, decoded.fields, deliveries, 'handler-failed', error);
      } else {
        this.logger.warn(
          `Entry ${id} of "${stream}" failed on delivery ${deliveries}/${maxDeliveries} (${message}); it stays pending and is retried after ${this.options.claim.minIdleMs} ms.`,
        );
      }
      return;
    }
    this.onProcessingEndHook?.(this.transportId!, ctx);
    if (ctx.isAckSkipped()) return;
    // Only a redelivered entry can have a recorded error.
    if (deliveries > 1) this.lastErrors.delete(`${stream}\u0000${id}`);
    this.batcher?.add(stream, id);
  }

  /** Moves an entry to the dead-letter stream and acknowledges it, in one Lua script. */
  protected async deadLetter(
    stream: string,
    id: string,
    fields: Record<string, string>,
    deliveries: number,
    reason: 'malformed' | 'max-deliveries' | 'handler-failed',
    error: unknown,
  ): Promise<void> {
    const dlq = this.options.deadLetter.stream(stream);
    const errorName = error instanceof Error ? error.name : typeof error;
    const stack = error instanceof Error && error.stack ? error.stack : '';
    await this.unwrapCommands().sbaDeadLetter(
      stream,
      dlq,
      this.options.group,
      id,
      String(this.options.deadLetter.maxLen),
      'stream',
      stream,
      'id',
      id,
      'group',
      this.options.group,
      'consumer',
      this.options.consumer,
      'deliveries',
      String(deliveries),
      'reason',
      reason,
      'error',
      describeError(error),
      'errorName',
      errorName,
      'stack',
      stack,
      'failedAt',
      new Date().toISOString(),
      'fields',
      JSON.stringify(fields),
    );
    this.lastErrors.delete(`${stream}\u0000${id}`);
  }
}
